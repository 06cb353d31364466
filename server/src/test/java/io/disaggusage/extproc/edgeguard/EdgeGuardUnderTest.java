package io.disaggusage.extproc.edgeguard;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.metrics.EdgeGuardMetrics;
import io.disaggusage.extproc.metrics.Metrics;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The edge guard behind an in-process gRPC transport, driven by the fake Envoy with the ext_proc filter
 * of the shipped {@code deploy/envoy/edge-guard/envoy.yaml} (its 200 ms message timeout raised to 1 s, so
 * a stalled test machine does not fail a request closed).
 */
final class EdgeGuardUnderTest implements AutoCloseable {
  final Metrics metrics = Metrics.standalone();
  final EdgeGuardMetrics edge = new EdgeGuardMetrics(metrics.registry());
  final FakeEnvoy envoy;
  private final Server server;
  private final ManagedChannel channel;

  EdgeGuardUnderTest(String... settings) throws Exception {
    this(EnvoyProfile.V1_37, settings);
  }

  EdgeGuardUnderTest(EnvoyProfile profile, String... settings) throws Exception {
    String name = InProcessServerBuilder.generateName();
    server =
        InProcessServerBuilder.forName(name)
            .addService(new EdgeGuardService(config(settings), metrics, edge))
            .build()
            .start();
    channel = InProcessChannelBuilder.forName(name).build();
    envoy =
        FakeEnvoy.builder(channel)
            .config(FilterConfigs.withMessageTimeout(shippedFilter(), Duration.ofSeconds(1)))
            .profile(profile)
            .build();
  }

  /** {@code edge_guard.enabled} plus {@code key=value} settings, loaded as the server loads them. */
  static Config config(String... settings) throws Exception {
    List<Setting> all =
        Stream.concat(Stream.of("edge_guard.enabled=true"), Arrays.stream(settings))
            .map(s -> new Setting(s.substring(0, s.indexOf('=')), s.substring(s.indexOf('=') + 1), "test"))
            .toList();
    return ConfigLoader.load(null, Map.of(), all);
  }

  static Path shippedBootstrap() {
    String root = System.getProperty("project.root", "..");
    return Path.of(root).resolve("deploy/envoy/edge-guard/envoy.yaml").toAbsolutePath().normalize();
  }

  static ExternalProcessor shippedFilter() throws Exception {
    return FilterConfigs.parse(Files.readString(shippedBootstrap()));
  }

  ExchangeResult run(Exchange.Builder exchange) {
    return envoy.execute(exchange.build());
  }

  @Override
  public void close() throws Exception {
    envoy.close();
    channel.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
  }
}
