package io.disaggusage.extproc.edgeguard;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.edge.MemberPaths;
import io.disaggusage.extproc.edge.MemberRemoval;
import io.disaggusage.extproc.metrics.EdgeGuardMetrics;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.stream.ExchangeCallHandler;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.BindableService;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.StreamObserver;
import io.disaggusage.extproc.logging.RateLimitedLog;
import java.time.Duration;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The ext_proc service of the edge role ({@code edge_guard.enabled}): attached to the client-facing
 * route, it removes from every client request what only the prefill/decode machinery may set — the
 * {@code x-disagg-*} and configured headers, and the configured members of the JSON bodies of {@code
 * classification.paths} — and leaves every other byte as the client sent it. One {@link
 * EdgeGuardStream} per ext_proc stream; bound like the usage service ({@link ExchangeCallHandler}).
 */
public final class EdgeGuardService implements BindableService {

  /**
   * What every stream shares. {@code removal} is null when no body member is to be removed; {@code
   * errors} warns of internal errors at most once per 10 s.
   */
  record Shared(
      HeaderStrip headers,
      Set<String> paths,
      MemberRemoval removal,
      Metrics metrics,
      EdgeGuardMetrics edge,
      RateLimitedLog errors) {}

  private static final Logger log = LoggerFactory.getLogger(EdgeGuardService.class);

  private final Shared shared;

  public EdgeGuardService(Config config, Metrics metrics, EdgeGuardMetrics edge) {
    Config.EdgeGuard settings = config.edgeGuard();
    MemberRemoval removal =
        settings.removeMembers().isEmpty()
            ? null
            : new MemberRemoval(
                MemberPaths.of(settings.removeMembers()),
                new MemberRemoval.Limits(
                    MemberRemoval.Limits.DEFAULTS.maxDepth(),
                    settings.maxStringBytes(),
                    MemberRemoval.Limits.DEFAULTS.maxHeldBytes()));
    this.shared =
        new Shared(
            new HeaderStrip(settings.removeHeaders()),
            Set.copyOf(config.classification().paths()),
            removal,
            metrics,
            edge,
            new RateLimitedLog(log, 1, Duration.ofSeconds(10)));
  }

  /**
   * Warms the body path up before the guard serves ({@link EdgeGuardWarmup}), for at most {@code
   * budget}; returns the rounds run (0 when no member is removed, so no body is read).
   */
  public int warmUp(Duration budget) {
    return shared.removal() == null ? 0 : EdgeGuardWarmup.run(shared.removal(), budget);
  }

  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> replies) {
    return new EdgeGuardStream(shared, replies);
  }

  @Override
  public ServerServiceDefinition bindService() {
    return ExchangeCallHandler.bind(this::process);
  }
}
