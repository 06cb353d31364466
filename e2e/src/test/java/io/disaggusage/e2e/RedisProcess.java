package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import java.time.Duration;
import java.util.List;

/** A real redis-server on a loopback port that survives being killed and started again. */
final class RedisProcess extends ChildProcess {
  private final String name;
  private final int port = FreePorts.next();

  RedisProcess(String name) {
    super(Duration.ofSeconds(5));
    this.name = name;
  }

  RedisProcess start() {
    var log = Tools.logs().resolve(name + ".log");
    process = Processes.start(List.of(Tools.redisServer().toString(), "--port", Integer.toString(port), "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no"), log, log);
    Processes.await(name + " accepting connections", Duration.ofSeconds(10), () -> {
      try (var socket = new java.net.Socket("127.0.0.1", port)) {
        return true;
      } catch (java.io.IOException e) {
        return false;
      }
    });
    return this;
  }

  String uri() {
    return "redis://127.0.0.1:" + port;
  }

  /** The service settings of a replica whose store is this Redis. */
  String[] storeSettings() {
    return new String[] {"--set", "store.type=redis", "--set", "store.redis_uri=" + uri()};
  }

}
