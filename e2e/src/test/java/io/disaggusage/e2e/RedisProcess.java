package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.RedisNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * A {@link RedisNode} of the e2e suite: its log {@code e2e-logs/<name>.log}, its working directory a folder
 * of that run that starts empty (a previous run's {@code nodes.conf} names other ports), kept across
 * restarts, so a Cluster node comes back with its {@code nodes.conf} (and rejoins its cluster) and a
 * sentinel with the configuration it rewrote. A subclass may be reached otherwise ({@link #uri()},
 * {@link #storeSettings()}).
 */
class RedisProcess extends RedisNode {
  /** A plain node on a fresh port. */
  RedisProcess(String name) {
    this(name, FreePorts.next(), List.of());
  }

  /** A data node on {@code port} started with {@code arguments} after the common ones. */
  RedisProcess(String name, int port, List<String> arguments) {
    this(name, port, null, arguments);
  }

  /** {@code config}: a configuration file (a sentinel's), or null. */
  private RedisProcess(String name, int port, Path config, List<String> arguments) {
    super(name, port, config, Tools.emptyFolder(name + "-data"), Tools.logs().resolve(name + ".log"), arguments);
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

  @Override
  public RedisProcess start() {
    super.start();
    return this;
  }

  /** The service settings of a replica whose store is this Redis. */
  String[] storeSettings() {
    return new String[] {"--set", "store.type=redis", "--set", "store.redis_uri=" + uri()};
  }
}
