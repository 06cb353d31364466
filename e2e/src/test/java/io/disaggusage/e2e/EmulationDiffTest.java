package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.DisaggFlows;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The emulation answers to the real thing: each scenario vector runs once through real Envoy and once
 * through {@code simulation/envoy} (the fake Envoy the server's suite trusts), both in front of the same
 * service process through a {@link RecordingProxy}. The client bytes, the bytes the workers receive and
 * the ext_proc messages the service receives (as a {@link Transcript}) must agree. docs/real-envoy.md
 * lists the differences this test found and how each was settled.
 */
class EmulationDiffTest {
  private static Worker context;
  private static Worker generation;
  private static ServiceProcess service;
  private static RecordingProxy proxy;
  private static final java.util.Map<String, EnvoyProcess> ENVOYS = new java.util.concurrent.ConcurrentHashMap<>();
  private static FakeEnvoy fake;
  private static io.grpc.ManagedChannel fakeChannel;

  static Stream<Arguments> vectors() {
    List<Vector> vectors = new ArrayList<>(ScenarioVectors.all());
    vectors.addAll(ScenarioVectors.messages());
    vectors.add(ScenarioVectors.trtMsgpack().get(0));
    return Tools.perRelease(vectors);
  }

  @BeforeAll
  static void start() {
    context = new Worker("diff-context");
    generation = new Worker("diff-generation");
    service = ServiceProcess.started("diff-service");
    proxy = new RecordingProxy(service.grpcPort());
    fake = FakeEnvoy.builder(fakeChannel = proxy.channel()).config(ShippedEnvoyConfig.extProcFilter()).profile(EnvoyProfile.V1_37).build();
  }

  @AfterAll
  static void stop() throws Exception {
    ENVOYS.values().forEach(EnvoyProcess::close);
    if (fake != null) {
      fake.close();
      fakeChannel.shutdownNow();
    }
    if (proxy != null) {
      proxy.close();
    }
    if (service != null) {
      service.close();
    }
    context.close();
    generation.close();
  }

  static EnvoyProcess envoy(String release) {
    return ENVOYS.computeIfAbsent(release, r -> {
      var topology = new ShippedBootstrap.Topology(FreePorts.next(), FreePorts.next(), FreePorts.next(),
          List.of(context.port()), List.of(generation.port()), List.of(proxy.port()));
      EnvoyProcess envoy = EnvoyProcess.start("diff-envoy-" + r, r, topology);
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      // Warm the recording hop's JIT first: a cold extra hop can miss Envoy's 200 ms message timeout.
      VllmFlow warm = new VllmFlow(3, Duration.ofMillis(1)).install(Stack.around(context, generation, envoy));
      for (int i = 0; i < 20; i++) {
        warm.run(Stack.around(context, generation, envoy), "warm-" + r + "-" + i);
      }
      proxy.drain();
      return envoy;
    });
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("vectors")
  void realEnvoyAndTheEmulationAgree(String release, Vector v) {
    EnvoyProcess envoy = envoy(release);
    Stack stack = Stack.around(context, generation, envoy);
    context.clear();
    generation.clear();
    proxy.drain();
    VectorFlow.Result real = VectorFlow.run(stack, v);
    assertThat(generationLines(envoy)).as("the real flow was corrected, not failed open").last()
        .satisfies(line -> assertThat(line.field("usage_outcome")).isEqualTo("rewritten"));
    List<RecordingProxy.Recorded> realStreams = awaitStreams(v);

    ExchangeResult[] emulated = emulate(v);
    List<RecordingProxy.Recorded> emulatedStreams = awaitStreams(v);

    // Bytes the orchestrator receives.
    assertThat(emulated[1].clientResponse().body()).as("generation bytes").isEqualTo(real.generation().body());
    if (v.context() != null) {
      assertThat(emulated[0].clientResponse().body()).as("context bytes").isEqualTo(real.context().body());
      assertThat(emulated[0].upstreamRequest().body()).as("context request at the worker").isEqualTo(context.received().get(0).body());
    }
    assertThat(emulated[1].upstreamRequest().body()).as("generation request at the worker").isEqualTo(generation.received().get(0).body());
    // What the service received and answered, stream by stream.
    List<List<String>> realTranscripts = transcripts(realStreams);
    List<List<String>> emulatedTranscripts = transcripts(emulatedStreams);
    if (!realTranscripts.equals(emulatedTranscripts)) {
      dump(release + "-" + v.name(), realTranscripts, emulatedTranscripts);
    }
    assertThat(emulatedTranscripts).as("ext_proc streams, emulation vs Envoy " + release + " (see e2e/target/e2e-logs/diff-*)")
        .isEqualTo(realTranscripts);
  }

  private static List<AccessLogLine> generationLines(EnvoyProcess envoy) {
    Processes.sleepMillis(100); // the access log is flushed every 20 ms
    return envoy.accessLog().stream().filter(l -> l.cluster().equals("generation")).toList();
  }

  private static void dump(String name, List<List<String>> real, List<List<String>> emulated) {
    try {
      java.nio.file.Files.writeString(Tools.logs().resolve("diff-" + name + "-real.txt"), render(real));
      java.nio.file.Files.writeString(Tools.logs().resolve("diff-" + name + "-emulated.txt"), render(emulated));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static String render(List<List<String>> streams) {
    StringBuilder sb = new StringBuilder();
    streams.forEach(s -> sb.append("--- stream\n").append(String.join("\n", s)).append('\n'));
    return sb.toString();
  }

  private static List<List<String>> transcripts(List<RecordingProxy.Recorded> streams) {
    return streams.stream().map(Transcript::of).sorted(java.util.Comparator.comparing(Object::toString)).toList();
  }

  private static List<RecordingProxy.Recorded> awaitStreams(Vector v) {
    int expected = v.context() == null ? 1 : 2;
    Processes.await("the recorded ext_proc streams", Duration.ofSeconds(10), () -> proxy.peek() >= expected);
    Processes.sleepMillis(50); // late replies of a stream that already ended
    return proxy.drain();
  }

  /** Runs the vector through the fake Envoy; the context result (null if none) and the generation result. */
  private static ExchangeResult[] emulate(Vector v) {
    Exchange.Builder gen = exchange(v.generation(), "generation");
    return switch (v.order()) {
      case CONTEXT_FIRST -> DisaggFlows.contextFirst(fake, exchange(v.context(), "context"), gen);
      case GENERATION_FIRST -> DisaggFlows.generationFirst(fake, exchange(v.context(), "context"), gen);
      case CARRIED -> new ExchangeResult[] {null, DisaggFlows.run(fake, gen)};
    };
  }

  /** The leg as the fake Envoy plays it: the same request and worker reply, cut as the worker writes it. */
  private static Exchange.Builder exchange(Leg leg, String cluster) {
    Exchange.Builder b = Exchange.post(leg.path(), "").requestBody(leg.requestBody()).requestContentLength()
        .requestAttribute("xds.cluster_name", cluster)
        .responseHeader("content-type", leg.contentType())
        .responseBody(leg.responseBody());
    leg.requestHeaders().forEach(b::requestHeader);
    Chunking pieces = Chunking.fixed(Math.max(1, (leg.responseBody().length + VectorFlow.PIECES - 1) / VectorFlow.PIECES));
    // As the worker sends it and Envoy's HTTP/1 codec delivers it: JSON with a content-length, its end an
    // empty message of its own after the last bytes; a stream chunked.
    return VectorFlow.reply(leg).contentLength()
        ? b.responseContentLength().responseChunking(pieces.withEmptyFinalChunk())
        : b.responseChunking(pieces);
  }
}
