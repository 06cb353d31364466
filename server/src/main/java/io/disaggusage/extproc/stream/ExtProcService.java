package io.disaggusage.extproc.stream;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.classify.ExchangeClassifier;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.usage.UsageDocument;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.BindableService;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.UnaryOperator;

/**
 * The ext_proc gRPC service ({@code envoy.service.ext_proc.v3.ExternalProcessor/Process}): one
 * {@link ExchangeStream} state machine per stream, i.e. per HTTP exchange through Envoy.
 */
public final class ExtProcService implements ExternalProcessorGrpc.AsyncService, BindableService {
  private final ExchangeServices services;

  public ExtProcService(
      Config config, ContextUsageStore store, Metrics metrics, ScheduledExecutorService timer) {
    this(config, store, metrics, timer, UnaryOperator.identity());
  }

  /** For tests that substitute parts of the core: {@code processors} wraps the real body processors. */
  ExtProcService(
      Config config,
      ContextUsageStore store,
      Metrics metrics,
      ScheduledExecutorService timer,
      UnaryOperator<ResponseProcessors> processors) {
    int maxDocument = Math.max(config.limits().maxBodyBytes(), config.limits().maxEventBytes());
    JsonFactory json = UsageDocument.newFactory(maxDocument);
    this.services =
        new ExchangeServices(
            config,
            new ExchangeClassifier(CoreSettings.classification(config)),
            processors.apply(new ProcessorFactory(json, CoreSettings.bodyLimits(config))),
            json,
            store,
            metrics,
            timer,
            new ExchangeWarnings(),
            new WaitLimiter(config.limits().maxWaiters()));
  }

  @Override
  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
    return new ExchangeStream(services, responses);
  }

  /**
   * The service bound through {@link ExchangeCallHandler} rather than grpc-java's stub adapter (which
   * is why this class is no {@code ExternalProcessorImplBase}: its binding is final).
   */
  @Override
  public ServerServiceDefinition bindService() {
    return ExchangeCallHandler.bind(this::process);
  }
}
