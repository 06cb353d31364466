package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.config.ListenAddress;
import io.disaggusage.extproc.warmup.WarmupStack;
import io.grpc.BindableService;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.X509ExtendedTrustManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The real listener's twin for the start-up warm-up: the same transport and event loops (a Unix socket
 * listener's own, or grpc-java's shared TCP ones), TLS when the listener has it, the same connection
 * settings and the same services, on an address only this process uses — an ephemeral {@code 127.0.0.1}
 * port, or a socket in a new private temporary directory.
 */
final class PrivateListener implements WarmupStack {
  private static final Logger log = LoggerFactory.getLogger(PrivateListener.class);

  /** Adds the services (and anything else the real server gets) to a server builder. */
  @FunctionalInterface
  interface Services {
    NettyServerBuilder addTo(NettyServerBuilder builder, BindableService extProc, BindableService health);
  }

  private final GrpcListener listener;
  private final Services services;
  private Path socketDirectory;

  PrivateListener(GrpcListener listener, Services services) {
    this.listener = listener;
    this.services = services;
  }

  @Override
  public Server start(BindableService extProc, BindableService health) throws IOException {
    ServerCredentials credentials =
        listener.tls() != null ? listener.tls().warmupCredentials() : InsecureServerCredentials.create();
    SocketAddress address;
    if (listener.kind() == ListenAddress.Kind.UNIX) {
      socketDirectory = Files.createTempDirectory("disagg-usage-warmup");
      address = new DomainSocketAddress(socketDirectory.resolve("s").toString());
    } else {
      address = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
    }
    return services.addTo(listener.serverBuilder(address, credentials), extProc, health).build().start();
  }

  @Override
  public ManagedChannel connect(Server server) {
    ChannelCredentials credentials =
        listener.tls() != null
            ? TlsChannelCredentials.newBuilder().trustManager(new OwnServerTrust()).build()
            : InsecureChannelCredentials.create();
    if (listener.kind() == ListenAddress.Kind.UNIX) {
      return NettyChannelBuilder.forAddress(new DomainSocketAddress(socketDirectory.resolve("s").toString()), credentials)
          .channelType(EpollDomainSocketChannel.class)
          .eventLoopGroup(listener.unixWorkers())
          .overrideAuthority("localhost")
          .build();
    }
    return NettyChannelBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getPort()), credentials)
        .build();
  }

  /** The private directory of a Unix socket twin, or null. */
  Path socketDirectory() {
    return socketDirectory;
  }

  @Override
  public void close() {
    if (socketDirectory == null) {
      return;
    }
    try {
      Files.deleteIfExists(socketDirectory.resolve("s"));
      Files.deleteIfExists(socketDirectory);
    } catch (IOException e) {
      log.warn("could not remove the warm-up's socket directory {}: {}", socketDirectory, e.toString());
    }
  }

  /**
   * Trusts the server's certificate without checking it. The warm-up's client only ever connects to the
   * private server this process has just started on loopback or in its own temporary directory, and
   * sends synthetic exchanges only; the operator's certificate need not name {@code 127.0.0.1}.
   */
  private static final class OwnServerTrust extends X509ExtendedTrustManager {
    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType) {}

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {
      throw new UnsupportedOperationException("client side only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket) {
      throw new UnsupportedOperationException("client side only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType) {
      throw new UnsupportedOperationException("client side only");
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return new X509Certificate[0];
    }
  }
}
