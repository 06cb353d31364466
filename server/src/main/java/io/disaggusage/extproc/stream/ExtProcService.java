package io.disaggusage.extproc.stream;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.classify.ExchangeClassifier;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.usage.UsageDocument;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.ScheduledExecutorService;

/**
 * The ext_proc gRPC service ({@code envoy.service.ext_proc.v3.ExternalProcessor/Process}): one
 * {@link ExchangeStream} state machine per stream, i.e. per HTTP exchange through Envoy.
 */
public final class ExtProcService extends ExternalProcessorGrpc.ExternalProcessorImplBase {
  private final ExchangeServices services;

  public ExtProcService(
      Config config, ContextUsageStore store, Metrics metrics, ScheduledExecutorService timer) {
    int maxDocument = Math.max(config.limits().maxBodyBytes(), config.limits().maxEventBytes());
    JsonFactory json = UsageDocument.newFactory(maxDocument);
    this.services =
        new ExchangeServices(
            config,
            new ExchangeClassifier(CoreSettings.classification(config)),
            new ProcessorFactory(json, CoreSettings.bodyLimits(config)),
            json,
            store,
            metrics,
            timer);
  }

  /** For tests that substitute parts of the core (e.g. a failing body processor). */
  ExtProcService(ExchangeServices services) {
    this.services = services;
  }

  @Override
  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
    return new ExchangeStream(services, responses);
  }
}
