package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A real {@code redis-server} ({@code .tools/bin/redis-server}, see {@link InstalledTools}) on a loopback
 * port: a plain node, a Cluster node or a sentinel, as its arguments say. Nothing is persisted but what
 * Redis keeps in its working directory by itself (a Cluster node's {@code nodes.conf}, a sentinel's
 * rewritten configuration), so a node started again on the same port and directory comes back as it was.
 * It can be killed, frozen, thawed and started again. A subclass may listen otherwise
 * ({@link #listenArguments()}) and tell readiness otherwise ({@link #ready()}).
 */
public class RedisNode extends ChildProcess {
  private static final Duration READY_TIMEOUT = Duration.ofSeconds(10);
  private static final Duration STOP_GRACE = Duration.ofSeconds(5);

  private final int port;
  private final Path config;
  private final Path directory;
  private final List<String> arguments;

  /**
   * A node on {@code port} working in {@code directory}, its output appended to {@code log}, started with
   * {@code arguments} after the common ones; not started yet.
   */
  public RedisNode(String name, int port, Path directory, Path log, List<String> arguments) {
    this(name, port, null, directory, log, arguments);
  }

  /**
   * {@code config}: a configuration file (a sentinel's, which the sentinel rewrites as it learns the
   * topology), or null for none.
   */
  protected RedisNode(String name, int port, Path config, Path directory, Path log, List<String> arguments) {
    super(name, log, STOP_GRACE);
    this.port = port;
    this.config = config;
    this.directory = directory;
    this.arguments = List.copyOf(arguments);
  }

  /** A sentinel on {@code port} reading (and rewriting) {@code config}; not started yet. */
  public static RedisNode sentinel(String name, int port, Path config, Path directory, Path log) {
    return new RedisNode(name, port, config, directory, log, List.of("--sentinel"));
  }

  /** The binary: {@code .tools/bin/redis-server}, or the one {@code E2E_REDIS_SERVER} names. */
  public static Path binary() {
    return InstalledTools.installed("redis-server", "redis-server");
  }

  /** Starts it (again, after a kill) and returns once it is {@link #ready()}. */
  public RedisNode start() {
    List<String> command = new ArrayList<>();
    command.add(binary().toString());
    if (config != null) {
      command.add(config.toString()); // redis-server reads a configuration file only as its first argument
    }
    command.addAll(listenArguments());
    command.addAll(List.of("--bind", "127.0.0.1", "--dir", directory.toString()));
    if (config == null) {
      command.addAll(List.of("--save", "", "--appendonly", "no"));
    }
    command.addAll(arguments);
    launch(command);
    await("PING answered on port " + port, READY_TIMEOUT, this::ready);
    return this;
  }

  /** The arguments that make it listen on {@link #port()}: plain TCP. */
  protected List<String> listenArguments() {
    return List.of("--port", Integer.toString(port));
  }

  /**
   * Whether it serves: it answers PING with PONG. Asked, because a starting redis-server tells nobody
   * when it listens.
   */
  protected boolean ready() {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress("127.0.0.1", port), 200);
      socket.setSoTimeout(500);
      socket.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      byte[] reply = new byte[7];
      int n = socket.getInputStream().read(reply);
      return n >= 5 && new String(reply, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
    } catch (IOException e) {
      return false;
    }
  }

  public final int port() {
    return port;
  }

  /** {@code 127.0.0.1:port}, as nodes and the service's log lines name it. */
  public final String address() {
    return "127.0.0.1:" + port;
  }

  /** The URI a client reaches it with. */
  public String uri() {
    return "redis://" + address();
  }
}
