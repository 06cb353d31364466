package io.disaggusage.extproc.store;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real {@code redis-server} on a free loopback port, started from the binary on {@code PATH}, with
 * nothing persisted. Tests that need one call {@link #start()}: without the binary they fail, saying how to
 * install it — never a skip. {@link #stop()} kills the process (a crash, as far as
 * clients can tell); {@link #restart()} starts a new one on the same port.
 */
public final class RedisServer implements AutoCloseable {
  /** The binary; {@code scripts/install-test-tools} installs Debian's {@code redis-server} package. */
  public static final String BINARY = "redis-server";

  /** Servers still running when the test JVM exits (a test that never closed its server) are killed. */
  private static final java.util.Set<Process> LIVE = java.util.concurrent.ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly)));
  }

  private final int port;
  private final List<String> extraArgs;
  private final Path log;
  private final Path clusterConfig;
  private Process process;

  private RedisServer(int port, List<String> extraArgs) throws IOException {
    this.port = port;
    this.extraArgs = extraArgs;
    this.log = Files.createTempFile("redis-server-" + port + "-", ".log");
    int file = extraArgs.indexOf("--cluster-config-file");
    this.clusterConfig = file < 0 ? null : log.getParent().resolve(extraArgs.get(file + 1));
  }

  /** Starts a server, or fails the calling test when {@code redis-server} is missing. */
  public static RedisServer start(String... extraArgs) throws IOException {
    requireBinary();
    RedisServer server = new RedisServer(freePort(), List.of(extraArgs));
    server.launch();
    return server;
  }

  /** A server on {@code port}, e.g. one a store was configured with before Redis was there. */
  public static RedisServer startOn(int port, String... extraArgs) throws IOException {
    requireBinary();
    RedisServer server = new RedisServer(port, List.of(extraArgs));
    server.launch();
    return server;
  }

  /**
   * A one-node Redis Cluster: cluster mode on, every slot assigned to this node, state {@code ok}.
   * Enough for a {@code RedisClusterClient}, whose commands then go through cluster routing.
   */
  public static RedisServer startCluster() throws IOException {
    requireBinary();
    int port = freePort();
    RedisServer server =
        new RedisServer(
            port, List.of("--cluster-enabled", "yes", "--cluster-port", Integer.toString(freePort()), // not port + 10 000, which may be taken
                "--cluster-announce-ip", "127.0.0.1", "--cluster-config-file", "nodes-" + port + "-" + System.nanoTime() + ".conf"));
    server.launch();
    io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(server.uri());
    try (var connection = client.connect()) {
      var sync = connection.sync();
      int[] slots = new int[16384];
      for (int i = 0; i < slots.length; i++) {
        slots[i] = i;
      }
      sync.clusterAddSlots(slots);
      // A bounded poll, on purpose: the cluster state is the redis-server process's to reach, in its own time.
      long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      while (!sync.clusterInfo().contains("cluster_state:ok")) {
        if (System.nanoTime() > deadline) {
          throw new IOException("one-node cluster did not reach cluster_state:ok");
        }
        Thread.sleep(20);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    } finally {
      client.shutdown();
    }
    return server;
  }

  /** A loopback port nothing listens on now. */
  public static int unusedPort() throws IOException {
    return freePort();
  }

  /** Whether {@code redis-server} is on {@code PATH}. */
  public static boolean available() {
    String path = System.getenv("PATH");
    if (path == null) {
      return false;
    }
    for (String dir : path.split(File.pathSeparator)) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, BINARY))) {
        return true;
      }
    }
    return false;
  }

  /** Fails the calling test, saying how to install it, when {@code redis-server} cannot be started. */
  public static void requireBinary() {
    if (available()) {
      return;
    }
    String message =
        BINARY + " is not on PATH: run scripts/install-test-tools (or apt-get install redis-server) to run this test";
    fail(message);
  }

  public int port() {
    return port;
  }

  public String uri() {
    return "redis://127.0.0.1:" + port;
  }

  public boolean isRunning() {
    return process != null && process.isAlive();
  }

  /** Kills the server at once (SIGKILL): clients see their connections drop. */
  public void stop() throws InterruptedException {
    if (process != null) {
      process.destroyForcibly();
      process.waitFor(10, TimeUnit.SECONDS);
      LIVE.remove(process);
      process = null;
    }
  }

  /** A fresh, empty server on the same port. */
  public void restart() throws IOException, InterruptedException {
    stop();
    launch();
  }

  private void launch() throws IOException {
    List<String> command = new ArrayList<>();
    command.add(BINARY);
    command.addAll(
        List.of(
            "--port", Integer.toString(port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--dir", log.getParent().toString()));
    command.addAll(extraArgs);
    process =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .start();
    LIVE.add(process);
    // A bounded poll, on purpose: a starting redis-server tells nobody when it listens, so this asks.
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IOException(BINARY + " exited at start-up: " + Files.readString(log));
      }
      if (answersPing()) {
        return;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while starting " + BINARY, e);
      }
    }
    process.destroyForcibly();
    throw new IOException(BINARY + " did not answer PING within 10 s on port " + port);
  }

  private boolean answersPing() {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress("127.0.0.1", port), 200);
      socket.setSoTimeout(500);
      socket.getOutputStream().write("PING\r\n".getBytes());
      byte[] reply = new byte[7];
      int n = socket.getInputStream().read(reply);
      return n >= 5 && new String(reply, 0, n).startsWith("+PONG");
    } catch (IOException e) {
      return false;
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      socket.setReuseAddress(true);
      return socket.getLocalPort();
    }
  }

  @Override
  public void close() throws InterruptedException {
    stop();
    try {
      Files.deleteIfExists(log);
      if (clusterConfig != null) {
        Files.deleteIfExists(clusterConfig);
      }
    } catch (IOException ignored) {
      // a leftover temp log is harmless
    }
  }
}
