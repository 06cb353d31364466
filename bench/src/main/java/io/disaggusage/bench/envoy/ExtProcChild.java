package io.disaggusage.bench.envoy;

import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.LoopbackGet;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * An ext_proc server in a JVM of its own, so Envoy reaches it over loopback TCP as in a deployment and
 * its CPU and memory are its own: the shipped jar as a user starts it, or the null processor. Both run
 * on the same {@code java} as the benchmark, with the JVM's default flags.
 */
final class ExtProcChild extends ChildProcess {
  final int grpcPort;
  private final boolean service;
  /** JVM options put before the README's (the service only; {@code --service-jvm-options}). */
  private final List<String> jvmOptions;

  private ExtProcChild(String name, Path log, int grpcPort, boolean service, List<String> jvmOptions) {
    super(name, log, Duration.ofSeconds(5));
    this.grpcPort = grpcPort;
    this.service = service;
    this.jvmOptions = jvmOptions;
  }

  /**
   * The service as the README starts it ({@link InstalledTools#serviceCommand()}: its JVM options, the
   * class-data archive, the jar) with the settings {@code deploy/envoy/envoy.yaml} names, once
   * its {@code /readyz} says ready (warm-up done, gRPC health SERVING); {@code jvmOptions} go before the README's.
   */
  static ExtProcChild service(Path dir, List<String> jvmOptions) {
    return service(dir, FreePorts.next(), jvmOptions);
  }

  private static ExtProcChild service(Path dir, int grpc, List<String> jvmOptions) {
    int admin = FreePorts.next();
    List<String> command = new ArrayList<>(InstalledTools.serviceCommand());
    command.addAll(1, jvmOptions);
    command.addAll(List.of("--grpc-port", Integer.toString(grpc), "--admin-port", Integer.toString(admin)));
    command.addAll(ShippedBootstrap.SERVICE_SETTINGS);
    ExtProcChild child = new ExtProcChild("the service", dir.resolve("service.log"), grpc, true, jvmOptions);
    return started(child, command, () -> LoopbackGet.ok(admin, "/readyz"), "/readyz");
  }

  /** {@link NullProcessorServer} on this benchmark's class path, once it accepts connections. */
  static ExtProcChild nullProcessor(Path dir) {
    return nullProcessor(dir, FreePorts.next());
  }

  private static ExtProcChild nullProcessor(Path dir, int grpc) {
    List<String> command = List.of(java(), "-cp", System.getProperty("java.class.path"),
        NullProcessorServer.class.getName(), Integer.toString(grpc));
    ExtProcChild child = new ExtProcChild("the null processor", dir.resolve("null-processor.log"), grpc, false, List.of());
    return started(child, command, () -> FreePorts.accepts(grpc), "a listening port");
  }

  /**
   * A fresh process of the same kind on the same gRPC port, appending to the same log, once ready; call
   * after {@link #close()}.
   */
  ExtProcChild startAgain() {
    Path dir = log().getParent();
    return service ? service(dir, grpcPort, jvmOptions) : nullProcessor(dir, grpcPort);
  }

  private static ExtProcChild started(
      ExtProcChild child, List<String> command, java.util.function.BooleanSupplier ready, String what) {
    child.launch(command);
    try {
      child.await(what, Duration.ofSeconds(60), ready);
      return child;
    } catch (RuntimeException e) {
      child.close();
      throw e;
    }
  }

  private static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }
}
