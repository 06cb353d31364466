package io.disaggusage.e2e;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import io.lettuce.core.sentinel.api.sync.RedisSentinelCommands;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Function;

/**
 * The test's own commands to the Redis nodes and sentinels it runs (building a cluster, asking who is
 * master): one short-lived connection per call over one shared Lettuce client, so a call made while a
 * node is dead or frozen fails after its timeout instead of hanging the test.
 */
final class RedisAdmin {
  private static final RedisClient CLIENT = RedisClient.create();
  private static final Duration TIMEOUT = Duration.ofMillis(500);

  private RedisAdmin() {}

  private static RedisURI node(int port) {
    return RedisURI.builder().withHost("127.0.0.1").withPort(port).withTimeout(TIMEOUT).build();
  }

  /** {@code command} on the node at {@code port}; fails as the node does. */
  static <T> T on(int port, Function<RedisCommands<String, String>, T> command) {
    try (var connection = CLIENT.connect(node(port))) {
      return command.apply(connection.sync());
    }
  }

  /**
   * {@code CLUSTER MEET} from the node at {@code port} to the node at {@code peerPort} whose cluster bus
   * listens on {@code peerBusPort} (Lettuce's {@code clusterMeet} assumes the port + 10 000).
   */
  static void clusterMeet(int port, int peerPort, int peerBusPort) {
    on(port, c -> c.dispatch(CommandType.CLUSTER, new StatusOutput<>(StringCodec.UTF8),
        new CommandArgs<>(StringCodec.UTF8).add("MEET").add("127.0.0.1").add(peerPort).add(peerBusPort)));
  }

  /** {@link #on}, or empty when the node cannot be reached or answers with an error. */
  static <T> Optional<T> tryOn(int port, Function<RedisCommands<String, String>, T> command) {
    try {
      return Optional.ofNullable(on(port, command));
    } catch (RedisException e) {
      return Optional.empty();
    }
  }

  /** {@code command} on the sentinel at {@code port}, or empty when it cannot be reached. */
  static <T> Optional<T> trySentinel(int port, Function<RedisSentinelCommands<String, String>, T> command) {
    try (var connection = CLIENT.connectSentinel(node(port))) {
      return Optional.ofNullable(command.apply(connection.sync()));
    } catch (RedisException e) {
      return Optional.empty();
    }
  }

  /** Whether the node at {@code port} answers {@code ROLE} as a master. */
  static boolean isMaster(int port) {
    return tryOn(port, c -> c.role().get(0)).map("master"::equals).orElse(false);
  }
}
