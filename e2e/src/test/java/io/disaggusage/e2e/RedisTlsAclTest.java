package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The store on a real redis-server that speaks TLS only, with a server certificate from a private CA the
 * test makes, and an ACL user with {@link TlsRedisProcess#STORE_RULES} and a password ({@code default}
 * off): two service replicas behind real Envoy reach it with {@code rediss://user:password@} and a JVM
 * trust store holding only that CA. Flows are corrected, and again after Redis restarts; a wrong password
 * or a trust store without the CA leaves the service up and not ready, saying why; and no output of any
 * process of a run (TRACE level included) holds the ACL password or the trust store's.
 */
class RedisTlsAclTest {
  private static final String RELEASE = Tools.envoyReleases().get(0);
  private static final int FLOWS = 8;
  /** Down long enough for two failed health probes (about 2 s): readiness comes back through them too. */
  private static final Duration DOWN = Duration.ofMillis(2500);
  private static final Duration WARM_UP = Duration.ofSeconds(2);

  @Test
  void flowsAreCorrectedOverTlsAsTheAclUserAndAgainAfterRedisRestarts() throws IOException {
    PrivateCa ca = PrivateCa.create("tls-acl-flows");
    String password = PrivateCa.newSecret();
    try (TlsRedisProcess redis = new TlsRedisProcess("tls-acl-flows-redis", ca, password).start();
        Stack stack = Stack.start("tls-acl-flows", RELEASE, 2, ca.serviceCommand(), redis.storeSettings())) {
      Replicas replicas = new Replicas(stack);
      try (ClosedLoop load = new ClosedLoop(stack, new TruthFlow().install(stack), FLOWS)) {
        // Fresh JVMs on a busy 2-core host: their first store calls can miss the 50 ms budget (seen once at a
        // load average of 19), and that flow passes through unchanged. Counted for wrong and broken flows only.
        load.phase("0 warm-up", WARM_UP.toMillis());
        load.phase("1 healthy", 3000);
        replicas.assertReady("over TLS as the ACL user");

        redis.kill();
        load.phase("2 redis down", 0);
        Processes.await("both replicas 503 once Redis is gone", Duration.ofSeconds(5), replicas::allNotReady);
        assertNotReadyFor(replicas, DOWN);
        redis.start(); // the same port, certificate and ACL file
        long restarted = System.nanoTime();
        load.phase("3 redis restarted", 0);
        Processes.await("both replicas ready after the restart", Duration.ofSeconds(20), replicas::allReady);
        Duration ready = Duration.ofNanos(System.nanoTime() - restarted);
        load.phase("4 healthy again", 2000);
        load.close();

        Duration corrected = load.firstCorrectedAfter(restarted)
            .orElseThrow(() -> new AssertionError("no flow corrected after the restart; " + load));
        System.out.printf("Redis over TLS (private CA) as an ACL user, two services, Envoy %s, %d flows: %s%n",
            RELEASE, FLOWS, load);
        System.out.printf("restart → both ready %d ms; restart → first corrected %d ms (from Redis accepting connections)%n",
            ready.toMillis(), corrected.toMillis());
        load.assertEveryFlowRight("1 healthy", List.of("4 healthy again"));
        replicas.assertNoneRestarted();
        replicas.assertLogged("the connection", "connected to " + redis.address());
      }
    }
    assertThat(Files.readString(Tools.root().resolve("docs/redis.md")))
        .as("docs/redis.md quotes the ACL rules the test proved").contains(TlsRedisProcess.STORE_RULES);
    assertNoSecretIn("tls-acl-flows-", password, ca.trustStorePassword());
  }

  @Test
  void aWrongPasswordOrAnUnknownCaLeavesTheServiceUpNotReadyAndSayingWhy() {
    PrivateCa ca = PrivateCa.create("tls-acl-refused");
    PrivateCa otherCa = PrivateCa.create("tls-acl-refused-other"); // a trust store without Redis's CA
    String password = PrivateCa.newSecret();
    String wrong = PrivateCa.newSecret();
    try (TlsRedisProcess redis = new TlsRedisProcess("tls-acl-refused-redis", ca, password).start();
        ServiceProcess wrongPassword = ServiceProcess.create(
            "tls-acl-refused-wrong-password", ca.serviceCommand(), redis.storeSettings(wrong));
        ServiceProcess untrusted = ServiceProcess.create(
            "tls-acl-refused-untrusted", otherCa.serviceCommand(), redis.storeSettings())) {
      List<ServiceProcess> services = List.of(wrongPassword, untrusted);
      services.forEach(ServiceProcess::start);
      for (ServiceProcess service : services) {
        Processes.await(service.log().getFileName() + " /readyz answering", Duration.ofSeconds(30),
            () -> Http.status(service.adminUrl("/readyz")) != 0);
      }
      long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (System.nanoTime() < until) {
        for (ServiceProcess service : services) {
          assertThat(service.isAlive()).as(service.log().getFileName() + " running").isTrue();
          assertThat(Http.status(service.adminUrl("/readyz"))).as(service.log().getFileName() + " /readyz").isEqualTo(503);
        }
        Processes.sleepMillis(100);
      }

      List<String> refused = storeLines(wrongPassword, "WRONGPASS");
      System.out.printf("wrong ACL password: %d lines in %s, e.g.%n  %s%n", refused.size(),
          wrongPassword.log().getFileName(), refused.isEmpty() ? "(none)" : refused.get(refused.size() - 1));
      assertThat(refused).as("WARN lines saying WRONGPASS, retried about every second")
          .hasSizeGreaterThanOrEqualTo(3)
          .allMatch(l -> l.contains(" WARN ") && l.contains("cannot connect to " + redis.address()))
          .anyMatch(l -> l.contains("retrying in 1000 ms"));
      List<String> untrustedLines = storeLines(untrusted, "cannot connect to " + redis.address());
      System.out.printf("trust store without the CA: %d lines in %s, e.g.%n  %s%n", untrustedLines.size(),
          untrusted.log().getFileName(), untrustedLines.isEmpty() ? "(none)" : untrustedLines.get(untrustedLines.size() - 1));
      assertThat(untrustedLines).as("lines saying the server's certificate is not trusted")
          .isNotEmpty()
          .allMatch(l -> l.contains("PKIX path building failed") || l.contains("unable to find valid certification path"));
    }
    assertNoSecretIn("tls-acl-refused-", password, wrong, ca.trustStorePassword(), otherCa.trustStorePassword());
  }

  @Test
  void noOutputNamesASecretAtTraceLevelWithTheTrustStoreFromJdkJavaOptions() throws Exception {
    PrivateCa ca = PrivateCa.create("tls-acl-trace");
    String password = PrivateCa.newSecret();
    String wrong = PrivateCa.newSecret();
    // The trust store as a container with a fixed entrypoint takes it: JDK_JAVA_OPTIONS naming the argument file.
    String[] trace = {"--log-level", "trace", "JDK_JAVA_OPTIONS=" + ca.jvmOptionsArgument()};
    try (TlsRedisProcess redis = new TlsRedisProcess("tls-acl-trace-redis", ca, password).start();
        Stack stack = Stack.start("tls-acl-trace", RELEASE, 2, concat(redis.storeSettings(), trace));
        ServiceProcess refused = ServiceProcess.create("tls-acl-trace-wrong-password", concat(redis.storeSettings(wrong), trace));
        ServiceProcess printed = ServiceProcess.create("tls-acl-trace-print-config",
            concat(redis.storeSettings(), trace, new String[] {"--print-config"}))) {
      refused.start();
      printed.start();
      Replicas replicas = new Replicas(stack);
      try (ClosedLoop load = new ClosedLoop(stack, new TruthFlow().install(stack), 2)) {
        load.phase("1 healthy", 2000);
        redis.kill();
        load.phase("2 redis down", 1000);
        redis.start();
        load.phase("3 redis restarted", 0);
        Processes.await("both replicas ready after the restart", Duration.ofSeconds(20), replicas::allReady);
        load.phase("4 healthy again", 1000);
        load.close();
        System.out.printf("at TRACE level, two services over TLS as the ACL user: %s%n", load);
        assertThat(load.count("1 healthy", VllmFlow.Outcome.CORRECTED)).as("flows corrected at TRACE level; " + load).isPositive();
      }
      assertThat(printed.process().waitFor(30, TimeUnit.SECONDS)).as("--print-config exits").isTrue();
      assertThat(Files.readString(printed.log())).contains("redis_uri: \"rediss://***@" + redis.address() + "\"");
      Processes.await("the wrong password refused (WRONGPASS)", Duration.ofSeconds(30),
          () -> !storeLines(refused, "WRONGPASS").isEmpty());
      String service = Files.readString(stack.service().log());
      assertThat(service).as("TRACE lines written").contains(" TRACE ");
      assertThat(service).as("the JVM's echo of JDK_JAVA_OPTIONS: the file's name only")
          .contains("NOTE: Picked up JDK_JAVA_OPTIONS: " + ca.jvmOptionsArgument());
    }
    assertNoSecretIn("tls-acl-trace-", password, wrong, ca.trustStorePassword());

    // What docs/redis.md warns of: the JVM echoes JAVA_TOOL_OPTIONS whole on stderr.
    String trustStoreOption = "-Djavax.net.ssl.trustStorePassword=" + ca.trustStorePassword();
    assertThat(javaVersionWith(Map.of("JAVA_TOOL_OPTIONS", trustStoreOption)))
        .contains("Picked up JAVA_TOOL_OPTIONS: " + trustStoreOption);
  }

  /** Polls {@code /readyz} of every replica for {@code period}: 503 each time. */
  private static void assertNotReadyFor(Replicas replicas, Duration period) {
    long until = System.nanoTime() + period.toNanos();
    while (System.nanoTime() < until) {
      assertThat(replicas.allNotReady()).as("both replicas 503 while Redis is down").isTrue();
      Processes.sleepMillis(50);
    }
  }

  /** The Redis store's log lines of {@code service} that contain {@code text}. */
  private static List<String> storeLines(ServiceProcess service, String text) {
    try {
      return Files.readAllLines(service.log()).stream().filter(l -> l.contains("Redis store") && l.contains(text)).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * No file the run wrote beside the logs under {@code prefix} (every process's stdout and stderr, Envoy's
   * logs, the bootstraps, Redis's log and ACL file) holds any of {@code secrets}. The PKI folder, where the
   * trust store's password is on purpose, is a folder and not read.
   */
  private static void assertNoSecretIn(String prefix, String... secrets) {
    List<Path> files = new ArrayList<>();
    try (var listing = Files.list(Tools.logs())) {
      listing.filter(f -> f.getFileName().toString().startsWith(prefix) && Files.isRegularFile(f)).forEach(files::add);
      assertThat(files).as("files of the run " + prefix).anyMatch(f -> f.getFileName().toString().contains("-service-")
          || f.getFileName().toString().contains("-wrong-password"));
      for (Path file : files) {
        String text = new String(Files.readAllBytes(file), StandardCharsets.ISO_8859_1);
        for (String secret : secrets) {
          assertThat(text.contains(secret)).as(file.getFileName() + " holds a secret").isFalse();
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    System.out.printf("%d files of the run %s* checked: no secret in any%n", files.size(), prefix);
  }

  /** What {@code java -version} writes with {@code environment}. */
  private static String javaVersionWith(Map<String, String> environment) throws Exception {
    ProcessBuilder builder = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-version")
        .redirectErrorStream(true);
    builder.environment().putAll(environment);
    Process process = builder.start();
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    process.waitFor(30, TimeUnit.SECONDS);
    return output;
  }

  private static String[] concat(String[]... parts) {
    return java.util.Arrays.stream(parts).flatMap(java.util.Arrays::stream).toArray(String[]::new);
  }
}
