package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A real redis-server on a loopback port that survives being killed and started again: a plain node, a
 * Cluster node or a sentinel, as its arguments say. It keeps its port and its working directory across
 * restarts, so a Cluster node comes back with its {@code nodes.conf} (and rejoins its cluster) and a
 * sentinel with the configuration it rewrote. Nothing is persisted to disk beyond that. A subclass may
 * listen otherwise ({@link #listenArguments()}) and be reached otherwise ({@link #uri()}, {@link #storeSettings()}).
 */
class RedisProcess extends ChildProcess {
  private final String name;
  private final int port;
  private final Path config;
  private final List<String> arguments;
  private final Path directory;

  /** A plain node on a fresh port. */
  RedisProcess(String name) {
    this(name, FreePorts.next(), null, List.of());
  }

  /** A data node on {@code port} started with {@code arguments} after the common ones. */
  RedisProcess(String name, int port, List<String> arguments) {
    this(name, port, null, arguments);
  }

  /** {@code config}: a configuration file (a sentinel's), or null. */
  private RedisProcess(String name, int port, Path config, List<String> arguments) {
    super(Duration.ofSeconds(5));
    this.name = name;
    this.port = port;
    this.config = config;
    this.arguments = List.copyOf(arguments);
    // A previous run's nodes.conf names other ports: a node must start its life empty.
    this.directory = Tools.emptyFolder(name + "-data");
  }

  /**
   * A sentinel on a fresh port watching {@code master} as {@code masterName} with {@code quorum}, a
   * master it deems down after {@code downAfter} without an answer.
   */
  static RedisProcess sentinel(String name, String masterName, int masterPort, int quorum, Duration downAfter) {
    int port = FreePorts.next();
    Path config = Tools.logs().resolve(name + "-sentinel.conf");
    String text = String.join("\n",
        "port " + port,
        "bind 127.0.0.1",
        "sentinel monitor " + masterName + " 127.0.0.1 " + masterPort + " " + quorum,
        "sentinel down-after-milliseconds " + masterName + " " + downAfter.toMillis(),
        "sentinel failover-timeout " + masterName + " 10000",
        "sentinel parallel-syncs " + masterName + " 1",
        "");
    try {
      Files.writeString(config, text); // the sentinel rewrites it as it learns the topology
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return new RedisProcess(name, port, config, List.of("--sentinel"));
  }

  RedisProcess start() {
    var log = Tools.logs().resolve(name + ".log");
    List<String> command = new ArrayList<>();
    command.add(Tools.redisServer().toString());
    if (config != null) {
      command.add(config.toString()); // redis-server reads a configuration file only as its first argument
    }
    command.addAll(listenArguments());
    command.addAll(List.of("--bind", "127.0.0.1", "--dir", directory.toString()));
    if (config == null) {
      command.addAll(List.of("--save", "", "--appendonly", "no"));
    }
    command.addAll(arguments);
    process = Processes.start(command, log, log);
    Processes.await(name + " accepting connections", Duration.ofSeconds(10), this::accepts);
    return this;
  }

  /** The arguments that make it listen on {@link #port()}: plain TCP. */
  List<String> listenArguments() {
    return List.of("--port", Integer.toString(port));
  }

  /** Whether something accepts connections on this node's port. */
  boolean accepts() {
    try (var socket = new java.net.Socket("127.0.0.1", port)) {
      return true;
    } catch (java.io.IOException e) {
      return false;
    }
  }

  boolean isAlive() {
    return process != null && process.isAlive();
  }

  String name() {
    return name;
  }

  int port() {
    return port;
  }

  /** {@code 127.0.0.1:port}, as nodes and the service's log lines name it. */
  String address() {
    return "127.0.0.1:" + port;
  }

  String uri() {
    return "redis://" + address();
  }

  /** The service settings of a replica whose store is this Redis. */
  String[] storeSettings() {
    return new String[] {"--set", "store.type=redis", "--set", "store.redis_uri=" + uri()};
  }
}
