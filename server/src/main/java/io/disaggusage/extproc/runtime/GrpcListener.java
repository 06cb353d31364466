package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ListenAddress;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.ChannelOption;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.net.UnknownHostException;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where and how the gRPC server listens ({@code grpc.listen}, {@code grpc.tls.*}, keepalive and stream
 * limits): builds the {@link NettyServerBuilder} and owns what the server itself does not close — the
 * certificate reloader, the epoll event loops of a Unix socket listener, and the socket file.
 *
 * <p>Unix socket listener: Netty's native epoll transport (bundled in grpc-netty-shaded for Linux
 * x86_64 and aarch64); start-up fails with a message where it is unavailable. The socket's directory
 * must exist. A socket file left by a previous run is removed, unless a process still accepts
 * connections on it; any other file at that path is left alone and fails start-up. Once listening, the
 * socket file is made readable and writable by everyone ({@code rw-rw-rw-}), so an Envoy running as
 * another user can connect: restrict access with the directory's permissions. The file is removed on
 * shutdown.
 */
final class GrpcListener implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(GrpcListener.class);

  /** Permissions of the Unix socket file: any local user may connect; the directory gates access. */
  static final String SOCKET_PERMISSIONS = "rw-rw-rw-";

  private final Config.Grpc config;
  private final ListenAddress address;
  private ServerTls tls;
  private EventLoopGroup boss;
  private EventLoopGroup workers;
  private boolean socketCreated;

  private GrpcListener(Config.Grpc config) {
    this.config = config;
    this.address = config.listenAddress();
  }

  /**
   * Loads the TLS files and prepares the address; a Unix socket path is cleared of a stale socket.
   *
   * @throws StartupException naming the key when a file, the address or the transport is unusable
   */
  static GrpcListener prepare(Config.Grpc config) throws StartupException {
    GrpcListener listener = new GrpcListener(config);
    try {
      if (config.tls().enabled()) {
        listener.tls = ServerTls.start(config.tls());
      }
      if (listener.address.isUnix()) {
        listener.prepareUnixSocket();
      }
    } catch (StartupException | RuntimeException e) {
      listener.close();
      throw e;
    }
    return listener;
  }

  /** A server builder for the address, credentials and connection settings; services are added by the caller. */
  NettyServerBuilder serverBuilder() throws StartupException {
    ServerCredentials credentials = tls != null ? tls.credentials() : InsecureServerCredentials.create();
    return serverBuilder(socketAddress(), credentials);
  }

  /**
   * A server builder with this listener's transport, event loops and connection settings on another
   * address and with other credentials: the warm-up's private twin ({@link PrivateListener}).
   */
  NettyServerBuilder serverBuilder(SocketAddress address, ServerCredentials credentials) {
    NettyServerBuilder builder = NettyServerBuilder.forAddress(address, credentials);
    // Handlers never block (store and timer results come back as callbacks), so they run on the
    // transport's event loop: grpc-java's default hands every message to a pooled thread and back,
    // which through a real Envoy cost more CPU than all the service's own work (docs/performance.md).
    builder.directExecutor();
    if (this.address.isUnix()) {
      builder
          .channelType(EpollServerDomainSocketChannel.class)
          .bossEventLoopGroup(boss)
          .workerEventLoopGroup(workers)
          // grpc-java sets TCP keepalive on every accepted channel; a Unix socket has none, and Netty
          // would warn about the unknown option on every connection. A null value removes the option.
          .withChildOption(ChannelOption.SO_KEEPALIVE, null);
    }
    Duration keepalive = config.keepaliveTime();
    // A zero keepalive time turns the server's pings off (grpc-java treats a huge time as "never").
    builder.keepAliveTime(keepalive.isZero() ? Long.MAX_VALUE : keepalive.toNanos(), TimeUnit.NANOSECONDS);
    builder.keepAliveTimeout(config.keepaliveTimeout().toNanos(), TimeUnit.NANOSECONDS);
    // Envoy's HTTP/2 keepalive pings whether or not streams are open; punishing it would drop streams.
    builder
        .permitKeepAliveTime(config.permitKeepaliveTime().toNanos(), TimeUnit.NANOSECONDS)
        .permitKeepAliveWithoutCalls(true);
    if (config.maxConcurrentStreams() > 0) {
      builder.maxConcurrentCallsPerConnection(config.maxConcurrentStreams());
    }
    if (!config.maxConnectionIdle().isZero()) {
      builder.maxConnectionIdle(config.maxConnectionIdle().toNanos(), TimeUnit.NANOSECONDS);
    }
    return builder;
  }

  /** The kind of address the listener listens on. */
  ListenAddress.Kind kind() {
    return address.kind();
  }

  /** The event loops of a Unix socket listener (null for TCP, which uses grpc-java's shared ones). */
  EventLoopGroup unixWorkers() {
    return workers;
  }

  /** Call once the server listens: opens the Unix socket to the Envoy user. */
  void started() throws StartupException {
    if (!address.isUnix()) {
      return;
    }
    socketCreated = true;
    try {
      Files.setPosixFilePermissions(address.socketPath(), PosixFilePermissions.fromString(SOCKET_PERMISSIONS));
    } catch (IOException | UnsupportedOperationException e) {
      throw new StartupException(
          "grpc.listen " + ListenAddress.UNIX_PREFIX + address.socketPath() + ": cannot set the socket's"
              + " permissions: " + e,
          e);
    }
  }

  /** What the start-up line says about the listener, e.g. {@code port 9002} or {@code unix:///run/x.sock, TLS}. */
  String describe(Server server) {
    String where = address.describe(server.getPort());
    if (tls == null) {
      return where;
    }
    return where + (config.tls().clientAuth() ? ", mutual TLS" : ", TLS");
  }

  /** The listener's TLS credentials, or null without TLS. */
  ServerTls tls() {
    return tls;
  }

  /** The operator's message for a failed {@link Server#start()}. */
  String bindFailure(IOException e) {
    String reason = bindProblem(e);
    return switch (address.kind()) {
      case ALL_INTERFACES -> "grpc.port " + config.port() + ": cannot listen: " + reason;
      case HOST -> "grpc.listen " + address.describe(config.port()) + ": cannot listen: " + reason;
      case UNIX -> "grpc.listen " + ListenAddress.UNIX_PREFIX + address.socketPath() + ": cannot listen: " + reason;
    };
  }

  private SocketAddress socketAddress() throws StartupException {
    return switch (address.kind()) {
      case ALL_INTERFACES -> new InetSocketAddress(config.port());
      case HOST -> {
        try {
          yield new InetSocketAddress(InetAddress.getByName(address.host()), config.port());
        } catch (UnknownHostException e) {
          throw new StartupException("grpc.listen " + address.host() + ": cannot resolve the host name", e);
        }
      }
      case UNIX -> new DomainSocketAddress(address.socketPath().toString());
    };
  }

  private void prepareUnixSocket() throws StartupException {
    Path path = address.socketPath();
    String name = "grpc.listen " + ListenAddress.UNIX_PREFIX + path;
    if (!Epoll.isAvailable()) {
      Throwable cause = Epoll.unavailabilityCause();
      throw new StartupException(
          name
              + ": Unix domain sockets need Netty's native epoll transport (Linux x86_64 or aarch64),"
              + " which is unavailable here: "
              + (cause == null ? "unknown reason" : cause.toString())
              + "; listen on TCP instead",
          cause);
    }
    if (!Files.isDirectory(path.getParent())) {
      throw new StartupException(name + ": the socket's directory " + path.getParent() + " does not exist");
    }
    if (Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
      if (!isSocket(path)) {
        throw new StartupException(name + ": " + path + " exists and is not a socket; not replacing it");
      }
      if (accepting(path)) {
        throw new StartupException(name + ": another process is listening on " + path);
      }
      try {
        Files.deleteIfExists(path);
        log.info("removed the stale socket file {}", path);
      } catch (IOException e) {
        throw new StartupException(name + ": cannot remove the stale socket file: " + e, e);
      }
    }
    boss = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("disagg-usage-grpc-boss", true), EpollIoHandler.newFactory());
    workers = new MultiThreadIoEventLoopGroup(0, new DefaultThreadFactory("disagg-usage-grpc-worker", true), EpollIoHandler.newFactory());
  }

  private static boolean isSocket(Path path) {
    try {
      int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
      return (mode & 0170000) == 0140000; // S_IFSOCK
    } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
      try {
        return Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).isOther();
      } catch (IOException unreadable) {
        return false;
      }
    }
  }

  /** True when a process accepts connections on the socket, i.e. it is not stale. */
  private static boolean accepting(Path path) {
    try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      probe.connect(UnixDomainSocketAddress.of(path));
      return true;
    } catch (IOException e) {
      return false; // connection refused: nobody listens
    }
  }

  /**
   * Call after the server has terminated: stops the certificate reloader, the event loops and removes the
   * socket file.
   */
  @Override
  public void close() {
    if (tls != null) {
      tls.close();
    }
    for (EventLoopGroup group : new EventLoopGroup[] {boss, workers}) {
      if (group != null) {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
      }
    }
    if (socketCreated) {
      try {
        Files.deleteIfExists(address.socketPath());
      } catch (IOException e) {
        log.warn("could not remove the socket file {}: {}", address.socketPath(), e.toString());
      }
    }
  }

  /** The OS's reason, e.g. "Address already in use", from a bind failure however the transport wraps it. */
  static String bindProblem(IOException e) {
    Throwable root = e;
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof BindException && t.getMessage() != null) {
        return t.getMessage();
      }
      root = t;
    }
    String message = root.getMessage() != null ? root.getMessage() : root.toString();
    // Netty's native transport: "bind(..) failed with error(-98): Address already in use"
    int colon = message.lastIndexOf(": ");
    return colon >= 0 && root != e ? message.substring(colon + 2) : message;
  }
}
