package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.testkit.TestPki;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigException;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.testkit.TestPki.Issued;
import io.disaggusage.extproc.testkit.TestPki.KeyFormat;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.TlsChannelCredentials;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.ChannelOption;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code grpc.listen=unix://...}: the listener on a Unix domain socket, as an Envoy sidecar reaches it. */
class UnixSocketTest {
  @TempDir Path dir;

  private Path socket;
  private ServerRuntime runtime;
  private EventLoopGroup clientLoop;
  private final List<ManagedChannel> channels = new ArrayList<>();

  @BeforeEach
  void requireEpoll() {
    Assumptions.assumeTrue(
        Epoll.isAvailable(), () -> "Netty's native epoll transport is unavailable here: " + Epoll.unavailabilityCause());
    socket = dir.resolve("extproc.sock");
    clientLoop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  }

  @AfterEach
  void tearDown() throws InterruptedException {
    RuntimeTeardown.close(channels, runtime);
    if (clientLoop != null) {
      clientLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
  }

  private static Config config(String... settings) throws Exception {
    List<Setting> all = new ArrayList<>();
    all.add(new Setting("admin.port", "0", "test"));
    for (String setting : settings) {
      int eq = setting.indexOf('=');
      all.add(new Setting(setting.substring(0, eq), setting.substring(eq + 1), "test"));
    }
    return ConfigLoader.load(null, Map.of(), all);
  }

  private ManagedChannel channel(ChannelCredentials credentials, String authority) {
    NettyChannelBuilder builder =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()), credentials)
            .channelType(EpollDomainSocketChannel.class)
            .eventLoopGroup(clientLoop)
            .withOption(ChannelOption.SO_KEEPALIVE, null); // no TCP keepalive on a Unix socket
    if (authority != null) {
      builder.overrideAuthority(authority);
    }
    ManagedChannel channel = builder.build();
    channels.add(channel);
    return channel;
  }

  private static ServingStatus check(ManagedChannel channel) {
    return HealthGrpc.newBlockingStub(channel)
        .withDeadlineAfter(5, TimeUnit.SECONDS)
        .check(HealthCheckRequest.getDefaultInstance())
        .getStatus();
  }

  @Test
  void servesHealthAndExtProcOnTheSocketAndRemovesItOnShutdown() throws Exception {
    runtime = ServerRuntime.start(config("grpc.listen=unix://" + socket));

    assertThat(runtime.grpcPort()).isEqualTo(-1);
    assertThat(runtime.grpcAddress()).isInstanceOf(DomainSocketAddress.class);
    assertThat(((DomainSocketAddress) runtime.grpcAddress()).path()).isEqualTo(socket.toString());
    assertThat(socket).exists();
    // Envoy often runs as another user (Istio's proxy is uid 1337): anyone may connect, the directory gates.
    assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket))).isEqualTo("rw-rw-rw-");

    ManagedChannel channel = channel(InsecureChannelCredentials.create(), null);
    assertThat(check(channel)).isEqualTo(ServingStatus.SERVING);

    // One ext_proc exchange Envoy would send for a health probe through the proxy: not ours, all off.
    RawExtProcStream stream = new RawExtProcStream(channel);
    ProcessingResponse reply = stream.exchange(RawExtProcStream.requestHeaders("GET", "/health", true));
    assertThat(reply.hasRequestHeaders()).isTrue();
    assertThat(reply.getModeOverride())
        .isEqualTo(
            ProcessingMode.newBuilder()
                .setRequestHeaderMode(HeaderSendMode.SKIP)
                .setResponseHeaderMode(HeaderSendMode.SKIP)
                .setRequestBodyMode(BodySendMode.NONE)
                .setResponseBodyMode(BodySendMode.NONE)
                .setRequestTrailerMode(HeaderSendMode.SKIP)
                .setResponseTrailerMode(HeaderSendMode.SKIP)
                .build());
    stream.cancel();

    runtime.close();
    assertThat(socket).doesNotExist();
  }

  @Test
  void tlsWorksOverTheSocketToo() throws Exception {
    Issued ca = TestPki.ca("uds-ca");
    Issued server = TestPki.server(ca);
    Path cert = TestPki.writeCertificates(dir.resolve("tls.crt"), server.certificate());
    Path key = TestPki.writeKey(dir.resolve("tls.key"), server.keys(), KeyFormat.PKCS8);
    runtime =
        ServerRuntime.start(
            config("grpc.listen=unix://" + socket, "grpc.tls.cert_file=" + cert, "grpc.tls.key_file=" + key));

    ChannelCredentials tls =
        TlsChannelCredentials.newBuilder().trustManager(TestPki.trusting(ca.certificate())).build();
    assertThat(check(channel(tls, "localhost"))).isEqualTo(ServingStatus.SERVING);
  }

  @Test
  void aStaleSocketFromAPreviousRunIsReplaced() throws Exception {
    // A crashed run leaves its socket file behind: nobody accepts on it any more.
    try (ServerSocketChannel previous = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      previous.bind(UnixDomainSocketAddress.of(socket));
    }
    assertThat(socket).exists();

    runtime = ServerRuntime.start(config("grpc.listen=unix://" + socket));

    assertThat(check(channel(InsecureChannelCredentials.create(), null))).isEqualTo(ServingStatus.SERVING);
  }

  @Test
  void aSocketInUseOrAnotherFileIsNeverTakenOver() throws Exception {
    try (ServerSocketChannel live = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      live.bind(UnixDomainSocketAddress.of(socket));
      assertThatThrownBy(() -> ServerRuntime.start(config("grpc.listen=unix://" + socket)))
          .isInstanceOf(StartupException.class)
          .hasMessage("grpc.listen unix://" + socket + ": another process is listening on " + socket);
      assertThat(socket).exists();
    }
    Files.delete(socket);

    Files.writeString(socket, "not a socket");
    assertThatThrownBy(() -> ServerRuntime.start(config("grpc.listen=unix://" + socket)))
        .isInstanceOf(StartupException.class)
        .hasMessage("grpc.listen unix://" + socket + ": " + socket + " exists and is not a socket; not replacing it");
    assertThat(Files.readString(socket)).isEqualTo("not a socket");
  }

  @Test
  void theSocketDirectoryMustExist() throws Exception {
    Path missing = dir.resolve("absent").resolve("extproc.sock");
    assertThatThrownBy(() -> config("grpc.listen=unix://" + missing))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(
            "grpc.listen: the socket's directory " + missing.getParent() + " does not exist (it is not created;");
  }
}
