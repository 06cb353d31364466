package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.driver.Chunking;
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
  public record Outcome(DirectEnvoy.Stream context, DirectEnvoy.Stream generation) {
    /** The first protocol problem on either stream (reply owed, wrong reply), or null. */
    public String problem() {
      for (DirectEnvoy.Stream s : context == null ? List.of(generation) : List.of(context, generation)) {
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
    if (v.order() == Order.CARRIED) {
      DirectEnvoy.Stream g = generationEnvoy.open();
      whole(g, v.generation(), splits.generationRequest(), splits.generationResponse());
      return new Outcome(null, g);
    }
    if (v.order() == Order.CONTEXT_FIRST) {
      DirectEnvoy.Stream c = contextEnvoy.open();
      whole(c, v.context(), splits.contextRequest(), splits.contextResponse());
      DirectEnvoy.Stream g = generationEnvoy.open();
      whole(g, v.generation(), splits.generationRequest(), splits.generationResponse());
      return new Outcome(c, g);
    }
    // Generation first: its whole response, end of stream included, before the context body.
    DirectEnvoy.Stream g = generationEnvoy.open();
    request(g, v.generation(), splits.generationRequest());
    DirectEnvoy.Stream c = contextEnvoy.open();
    request(c, v.context(), splits.contextRequest());
    response(g, v.generation(), splits.generationResponse());
    response(c, v.context(), splits.contextResponse());
    complete(c);
    complete(g);
    return new Outcome(c, g);
  }

  static void whole(DirectEnvoy.Stream s, Leg leg, Chunking request, Chunking response) {
    request(s, leg, request);
    response(s, leg, response);
    complete(s);
  }

  /**
   * Envoy closes the stream only once the exchange is over, i.e. after the last reply: a generation
   * still waiting for its context (one that never comes) gets it at the wait's deadline.
   */
  static void complete(DirectEnvoy.Stream s) {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (s.owed() > 0 && s.violation() == null && System.nanoTime() < deadline) {
      try {
        Thread.sleep(2);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    s.complete();
  }

  static void request(DirectEnvoy.Stream s, Leg leg, Chunking chunking) {
    s.requestHeaders(leg.envoyRequestHeaders(), leg.cluster(), false);
    s.requestBody(nonEmpty(chunking.split(leg.requestBody())));
  }

  static void response(DirectEnvoy.Stream s, Leg leg, Chunking chunking) {
    s.responseHeaders(leg.envoyResponseHeaders(), false);
    s.responseBody(nonEmpty(chunking.split(leg.responseBody())));
  }

  /** A body is at least one message (the one carrying end_of_stream). */
  private static List<byte[]> nonEmpty(List<byte[]> chunks) {
    return chunks.isEmpty() ? List.of(new byte[0]) : chunks;
  }
}
