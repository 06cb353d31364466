package io.disaggusage.extproc.runtime;

import static io.disaggusage.extproc.scenario.Flows.assertClean;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * SIGTERM's path ({@link ServerRuntime#close()}): announce NOT_SERVING, refuse new streams, let the
 * exchanges in flight finish within {@code shutdown.drain_timeout}, cancel what is still open after it.
 */
class GracefulDrainTest {
  private static final String CONTEXT_CLUSTER = "prefill";

  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final List<ManagedChannel> channels = new ArrayList<>();
  private ServerRuntime runtime;

  @AfterEach
  void tearDown() throws InterruptedException {
    RuntimeTeardown.close(channels, runtime);
  }

  private ServerRuntime start(String drainTimeout) throws Exception {
    Config config =
        ConfigLoader.load(
            null,
            Map.of(),
            List.of(
                new Setting("grpc.port", "0", "test"),
                new Setting("admin.port", "0", "test"),
                new Setting("classification.context_clusters", CONTEXT_CLUSTER, "test"),
                new Setting("ordering.context_wait", "1s", "test"),
                new Setting("shutdown.drain_timeout", drainTimeout, "test")));
    runtime = ServerRuntime.start(ServiceUnderTest.withTestMessageTimeout(config));
    return runtime;
  }

  private ManagedChannel newChannel() {
    ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", runtime.grpcPort()).usePlaintext().build();
    channels.add(channel);
    return channel;
  }

  private int readyz() throws Exception {
    return http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + runtime.adminPort() + "/readyz"))
                .timeout(Duration.ofSeconds(5))
                .build(),
            HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }

  /** Waits until the channel's connection is no longer READY (a GOAWAY received makes it IDLE). */
  private static void awaitLeavesReady(ManagedChannel channel, Duration limit) throws InterruptedException {
    long deadline = System.nanoTime() + limit.toNanos();
    for (ConnectivityState state = channel.getState(false);
        state == ConnectivityState.READY;
        state = channel.getState(false)) {
      CountDownLatch changed = new CountDownLatch(1);
      channel.notifyWhenStateChanged(state, changed::countDown);
      assertThat(changed.await(deadline - System.nanoTime(), TimeUnit.NANOSECONDS))
          .as("channel still READY after %s", limit)
          .isTrue();
    }
  }

  /** True once a new Check RPC is refused (the server stopped accepting), false while it is answered. */
  private static boolean newStreamRefused(ManagedChannel channel) {
    try {
      HealthGrpc.newBlockingStub(channel)
          .withDeadlineAfter(2, TimeUnit.SECONDS)
          .check(HealthCheckRequest.getDefaultInstance());
      return false;
    } catch (StatusRuntimeException e) {
      assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
      return true;
    }
  }

  @Test
  void anExchangeInFlightCompletesUnharmedAndCloseReturnsRightAfterIt() throws Exception {
    start("20s");
    ManagedChannel envoyChannel = newChannel();
    String body = "{\"model\":\"m\",\"bootstrap_host\":\"p0\",\"bootstrap_room\":4242}";
    String contextResponse = Wire.chatCompletion("ctx", Wire.usage(120, 1, 16L));
    try (FakeEnvoy envoy =
        FakeEnvoy.builder(envoyChannel)
            .config(ServiceUnderTest.shippedFilterConfig(runtime.config()))
            .profile(EnvoyProfile.V1_37)
            .build()) {
      // A context exchange whose response body is still on its way from the worker.
      ExchangeHandle inFlight =
          envoy.start(
              Exchange.post("/v1/chat/completions", body)
                  .requestAttribute("xds.cluster_name", CONTEXT_CLUSTER)
                  .responseHeader("content-type", "application/json")
                  .responseBody(contextResponse)
                  .gateRequestBody()
                  .gateResponseBody()
                  .build());
      inFlight.awaitRequestHeadersForwarded();
      inFlight.releaseRequestBody();
      inFlight.awaitResponseHeadersForwarded();
      assertThat(runtime.metrics().activeStreams()).isEqualTo(1);

      ManagedChannel probeChannel = newChannel();
      HealthWatch all = HealthWatch.untilNotServing(probeChannel, "", () -> {});
      HealthWatch extProc = HealthWatch.untilNotServing(probeChannel, ServerRuntime.EXT_PROC_SERVICE_NAME, () -> {});
      all.await(ServingStatus.SERVING, Duration.ofSeconds(5));
      extProc.await(ServingStatus.SERVING, Duration.ofSeconds(5));

      // SIGTERM: close() runs on its own thread, as Main's signal handler does. That thread notes what
      // had been stored when close() returned: the exchange's usage, if close() waited for it.
      AtomicLong storedWhenClosed = new AtomicLong(-1);
      long begin = System.nanoTime();
      CompletableFuture<Duration> closed =
          CompletableFuture.supplyAsync(
              () -> {
                runtime.close();
                storedWhenClosed.set(runtime.metrics().exchangeCount(Phase.CONTEXT, Outcome.STORED));
                return Duration.ofNanos(System.nanoTime() - begin);
              });

      // Promptly: both health names NOT_SERVING, /readyz 503, and new streams refused.
      all.await(ServingStatus.NOT_SERVING, Duration.ofSeconds(2));
      extProc.await(ServingStatus.NOT_SERVING, Duration.ofSeconds(2));
      assertThat(all.seen()).containsExactly(ServingStatus.SERVING, ServingStatus.NOT_SERVING);
      assertThat(extProc.seen()).containsExactly(ServingStatus.SERVING, ServingStatus.NOT_SERVING);
      assertThat(readyz()).isEqualTo(503);
      Poll.until("new streams refused", Duration.ofSeconds(2), () -> newStreamRefused(newChannel()));
      // Envoy's own connection learns of the shutdown through GOAWAY, which takes a moment to arrive:
      // its channel then leaves READY, and a new stream on it finds the listener closed.
      awaitLeavesReady(envoyChannel, Duration.ofSeconds(2));
      assertThat(newStreamRefused(envoyChannel)).as("a new stream on Envoy's own connection refused").isTrue();

      // The exchange in flight is what keeps close() waiting ...
      assertThat(closed).isNotDone();
      assertThat(runtime.isTerminated()).isFalse();

      // ... and it completes as if nothing happened: the context response byte for byte, usage stored.
      inFlight.releaseResponseBody();
      ExchangeResult result = inFlight.awaitResult();
      assertClean(result);
      assertThat(result.clientResponse().bodyUtf8()).isEqualTo(contextResponse);
      assertThat(result.streamEnd()).isNotEqualTo(ExchangeResult.StreamEnd.SERVER_FAILED);
      assertThat(runtime.metrics().exchangeCount(Phase.CONTEXT, Outcome.STORED)).isEqualTo(1);

      // close() returns as soon as the last stream ended, far from the 20 s drain timeout.
      Duration took = closed.get(10, TimeUnit.SECONDS);
      assertThat(storedWhenClosed.get()).as("stored before close() returned").isEqualTo(1);
      assertThat(took).isLessThan(Duration.ofSeconds(5));
      assertThat(runtime.isTerminated()).isTrue();
    }
  }

  @Test
  void aStreamStillOpenAtTheDrainTimeoutIsCancelledAndCloseReturns() throws Exception {
    start("300ms");
    RawExtProcStream stuck = new RawExtProcStream(newChannel());
    // An exchange whose request body never comes: the stream would stay open forever.
    ProcessingResponse reply =
        stuck.exchange(RawExtProcStream.requestHeaders("POST", "/v1/chat/completions", false));
    assertThat(reply.hasRequestHeaders()).isTrue();

    long begin = System.nanoTime();
    runtime.close();
    Duration took = Duration.ofNanos(System.nanoTime() - begin);

    assertThat(took).isGreaterThanOrEqualTo(Duration.ofMillis(300)).isLessThan(Duration.ofSeconds(3));
    Status end = stuck.closed().get(5, TimeUnit.SECONDS);
    assertThat(end.getCode()).isIn(Status.Code.CANCELLED, Status.Code.UNAVAILABLE);
    assertThat(runtime.isTerminated()).isTrue();
    assertThat(runtime.metrics().activeStreams()).isZero();
  }

  @Test
  void aZeroDrainTimeoutCancelsAtOnce() throws Exception {
    start("0s");
    RawExtProcStream open = new RawExtProcStream(newChannel());
    open.exchange(RawExtProcStream.requestHeaders("POST", "/v1/chat/completions", false));

    long begin = System.nanoTime();
    runtime.close();

    assertThat(Duration.ofNanos(System.nanoTime() - begin)).isLessThan(Duration.ofSeconds(2));
    assertThat(open.closed().get(5, TimeUnit.SECONDS).getCode()).isNotEqualTo(Status.Code.OK);
  }
}
