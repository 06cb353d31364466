package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.util.Durations;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;

/** Shared in-process plumbing for the FakeEnvoy tests. */
abstract class FakeEnvoyTestSupport {
  private final List<AutoCloseable> closeables = new ArrayList<>();

  /** Starts the processor on an in-process server and returns a FakeEnvoy builder bound to it. */
  FakeEnvoy.Builder envoyFor(ScriptedProcessor processor) throws Exception {
    String name = InProcessServerBuilder.generateName();
    Server server =
        InProcessServerBuilder.forName(name).directExecutor().addService(processor).build().start();
    ManagedChannel channel = InProcessChannelBuilder.forName(name).directExecutor().build();
    closeables.add(() -> {
      channel.shutdownNow().awaitTermination(1, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(1, TimeUnit.SECONDS);
    });
    return FakeEnvoy.builder(channel);
  }

  FakeEnvoy envoy(ScriptedProcessor processor, ExternalProcessor config, EnvoyProfile profile)
      throws Exception {
    FakeEnvoy envoy = envoyFor(processor).config(config).profile(profile).build();
    closeables.add(0, envoy);
    return envoy;
  }

  /** An Envoy (1.36) whose processor passes every message: for what Envoy sends, not what it is told. */
  FakeEnvoy passThroughEnvoy(ExternalProcessor config) throws Exception {
    return envoy(ScriptedProcessor.passThrough(), config, EnvoyProfile.V1_36);
  }

  @AfterEach
  void closeAll() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
    closeables.clear();
  }

  /** The service's baseline filter config (behaviour.md §6): headers SEND, bodies NONE. */
  static ExternalProcessor.Builder baseline() {
    return ExternalProcessor.newBuilder()
        .setProcessingMode(ProcessingMode.newBuilder()
            .setRequestHeaderMode(HeaderSendMode.SEND)
            .setResponseHeaderMode(HeaderSendMode.SEND)
            .setRequestTrailerMode(HeaderSendMode.SKIP)
            .setResponseTrailerMode(HeaderSendMode.SKIP))
        .setMessageTimeout(Durations.fromMillis(200));
  }

  static ExternalProcessor.Builder withModes(BodySendMode requestBody, BodySendMode responseBody) {
    ExternalProcessor.Builder b = baseline();
    b.getProcessingModeBuilder().setRequestBodyMode(requestBody).setResponseBodyMode(responseBody);
    return b;
  }

  static List<ProcessingRequest.RequestCase> cases(List<ProcessingRequest> messages) {
    return messages.stream().map(ProcessingRequest::getRequestCase).toList();
  }

  static List<String> bodies(List<ProcessingRequest> messages) {
    return messages.stream()
        .filter(m -> m.hasRequestBody() || m.hasResponseBody())
        .map(ExtProcReplies::bodyText)
        .toList();
  }
}
