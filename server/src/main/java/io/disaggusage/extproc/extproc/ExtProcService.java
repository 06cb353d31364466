package io.disaggusage.extproc.extproc;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.ScheduledExecutorService;

/** The ext_proc gRPC service: one {@code ExchangeStream} state machine per Process stream. */
public final class ExtProcService extends ExternalProcessorGrpc.ExternalProcessorImplBase {
  private final Config config;
  private final ContextUsageStore store;
  private final Metrics metrics;
  private final ScheduledExecutorService timer;

  public ExtProcService(
      Config config, ContextUsageStore store, Metrics metrics, ScheduledExecutorService timer) {
    this.config = config;
    this.store = store;
    this.metrics = metrics;
    this.timer = timer;
  }

  @Override
  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
    return super.process(responses);
  }
}
