package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.driver.EnvoyStream;
import java.time.Duration;
import java.util.List;

/** Runs one {@link Vector} through {@link DirectEnvoy} with chosen chunkings of every body. */
public final class VectorRunner {
  private VectorRunner() {}

  /** How each of the four bodies is cut into messages. */
  public record Splits(Chunking contextRequest, Chunking contextResponse, Chunking generationRequest, Chunking generationResponse) {
    public static Splits generationOnly(Chunking generationResponse) {
      return new Splits(Chunking.whole(), Chunking.fixed(33), Chunking.whole(), generationResponse);
    }
  }

  /** What the client of each leg saw, and what Envoy noticed. */
  public record Outcome(EnvoyStream context, EnvoyStream generation) {
    /** The first protocol problem on either stream (reply owed, wrong reply), or null. */
    public String problem() {
      for (EnvoyStream s : context == null ? List.of(generation) : List.of(context, generation)) {
        if (s.violation() != null) {
          return s.violation();
        }
        if (s.owed() != 0) {
          return s.owed() + " replies still owed";
        }
      }
      return null;
    }
  }

  public static Outcome run(DirectEnvoy envoy, Vector v, Splits splits) {
    return run(envoy, envoy, v, splits);
  }

  /**
   * Runs {@code v} with its context leg through {@code contextEnvoy} and its generation leg through
   * {@code generationEnvoy}: two replicas of the service, as behind a Deployment sharing one store.
   */
  public static Outcome run(DirectEnvoy contextEnvoy, DirectEnvoy generationEnvoy, Vector v, Splits splits) {
    Outcome o = runUnrecorded(contextEnvoy, generationEnvoy, v, splits);
    // Recorded for the ExchangeInvariants checked after each test of the specification.
    if (o.context() != null) {
      ExchangeLedger.record(contextEnvoy, v.context(), o.context());
    }
    ExchangeLedger.record(generationEnvoy, v.generation(), o.generation());
    return o;
  }

  private static Outcome runUnrecorded(DirectEnvoy contextEnvoy, DirectEnvoy generationEnvoy, Vector v, Splits splits) {
    if (v.order() == Order.CARRIED) {
      EnvoyStream g = generationEnvoy.open();
      whole(g, v.generation(), splits.generationRequest(), splits.generationResponse());
      return new Outcome(null, g);
    }
    if (v.order() == Order.CONTEXT_FIRST) {
      EnvoyStream c = contextEnvoy.open();
      whole(c, v.context(), splits.contextRequest(), splits.contextResponse());
      EnvoyStream g = generationEnvoy.open();
      whole(g, v.generation(), splits.generationRequest(), splits.generationResponse());
      return new Outcome(c, g);
    }
    // Generation first: its whole response, end of stream included, before the context body.
    EnvoyStream g = generationEnvoy.open();
    request(g, v.generation(), splits.generationRequest());
    EnvoyStream c = contextEnvoy.open();
    request(c, v.context(), splits.contextRequest());
    response(g, v.generation(), splits.generationResponse());
    response(c, v.context(), splits.contextResponse());
    complete(c);
    complete(g);
    return new Outcome(c, g);
  }

  static void whole(EnvoyStream s, Leg leg, Chunking request, Chunking response) {
    request(s, leg, request);
    response(s, leg, response);
    complete(s);
  }

  /**
   * Envoy closes the stream only once the exchange is over, i.e. after the last reply: a generation
   * still waiting for its context (one that never comes) gets it at the wait's deadline.
   */
  static void complete(EnvoyStream s) {
    try {
      s.awaitReplies(Duration.ofSeconds(10));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    s.complete();
  }

  static void request(EnvoyStream s, Leg leg, Chunking chunking) {
    s.requestHeaders(leg.envoyRequestHeaders(), leg.cluster(), false);
    s.requestBody(nonEmpty(chunking.split(leg.requestBody())));
  }

  /**
   * Envoy holds the response body while the headers message waits for its reply (that reply may change
   * the processing mode, and it waits for the store lookup), so the body goes out only after it.
   */
  static void response(EnvoyStream s, Leg leg, Chunking chunking) {
    s.responseHeaders(leg.envoyResponseHeaders(), false);
    try {
      s.awaitReplies(Duration.ofSeconds(10));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    s.responseBody(nonEmpty(chunking.split(leg.responseBody())));
  }

  /** A body is at least one message (the one carrying end_of_stream). */
  private static List<byte[]> nonEmpty(List<byte[]> chunks) {
    return chunks.isEmpty() ? List.of(new byte[0]) : chunks;
  }
}
