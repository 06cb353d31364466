package io.disaggusage.extproc.store;

import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.RedisNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * The server tests' handle on a real {@code redis-server} ({@link RedisNode}: {@code .tools/bin/redis-server})
 * on a free loopback port, with nothing persisted, working in a temporary folder of its own. Tests that need
 * one call {@link #start()}: without the binary they fail, saying how to install it — never a skip.
 * {@link #stop()} kills the process (a crash, as far as clients can tell); {@link #restart()} starts a new
 * one on the same port.
 */
public final class RedisServer implements AutoCloseable {
  /** The program, as messages name it; {@code scripts/install-test-tools} links Debian's into {@code .tools/bin}. */
  public static final String BINARY = "redis-server";

  private final Path directory;
  private final RedisNode node;

  private RedisServer(int port, List<String> extraArgs) throws IOException {
    this.directory = Files.createTempDirectory("redis-server-" + port + "-");
    this.node = new RedisNode(BINARY + " on port " + port, port, directory, directory.resolve("redis.log"), extraArgs);
  }

  /** Starts a server, or fails the calling test when {@code redis-server} is missing. */
  public static RedisServer start(String... extraArgs) throws IOException {
    return startOn(FreePorts.next(), extraArgs);
  }

  /** A server on {@code port}, e.g. one a store was configured with before Redis was there. */
  public static RedisServer startOn(int port, String... extraArgs) throws IOException {
    requireBinary();
    RedisServer server = new RedisServer(port, List.of(extraArgs));
    server.node.start();
    return server;
  }

  /**
   * A one-node Redis Cluster: cluster mode on, every slot assigned to this node, state {@code ok}.
   * Enough for a {@code RedisClusterClient}, whose commands then go through cluster routing.
   */
  public static RedisServer startCluster() throws IOException {
    // the cluster bus port is chosen too: by default it is the port + 10 000, which may be taken
    RedisServer server = start("--cluster-enabled", "yes", "--cluster-port", Integer.toString(FreePorts.next()),
        "--cluster-announce-ip", "127.0.0.1", "--cluster-config-file", "nodes.conf");
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
    return FreePorts.next();
  }

  /** Whether {@code redis-server} is installed. */
  public static boolean available() {
    try {
      RedisNode.binary();
      return true;
    } catch (AssertionError missing) {
      return false;
    }
  }

  /** Fails the calling test, saying how to install it, when {@code redis-server} is not installed. */
  public static void requireBinary() {
    RedisNode.binary();
  }

  public int port() {
    return node.port();
  }

  public String uri() {
    return node.uri();
  }

  public boolean isRunning() {
    return node.isAlive();
  }

  /** Kills the server at once (SIGKILL): clients see their connections drop. */
  public void stop() throws InterruptedException {
    if (node.isAlive()) {
      node.kill();
    }
  }

  /** A fresh, empty server on the same port. */
  public void restart() throws IOException, InterruptedException {
    stop();
    node.start();
  }

  @Override
  public void close() throws InterruptedException {
    stop();
    try (Stream<Path> files = Files.walk(directory)) {
      for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(file);
      }
    } catch (IOException ignored) {
      // a leftover temporary folder is harmless
    }
  }
}
