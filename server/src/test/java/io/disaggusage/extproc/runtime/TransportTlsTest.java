package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.testkit.TestPki;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.testkit.TestPki.Issued;
import io.disaggusage.extproc.testkit.TestPki.KeyFormat;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.math.BigInteger;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.security.KeyStore;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.X509ExtendedTrustManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gRPC listener over TLS and mutual TLS, with real certificates and a real grpc-java client; and a
 * certificate replaced on disk while a stream is open, as cert-manager does.
 */
class TransportTlsTest {
  @TempDir Path dir;

  private Issued ca;
  private Issued server;
  private Path certFile;
  private Path keyFile;
  private Path caFile;
  private ServerRuntime runtime;
  private final List<ManagedChannel> channels = new ArrayList<>();

  @BeforeEach
  void pki() throws Exception {
    ca = TestPki.ca("extproc-test-ca");
    server = TestPki.server(ca);
    certFile = TestPki.writeCertificates(dir.resolve("tls.crt"), server.certificate());
    keyFile = TestPki.writeKey(dir.resolve("tls.key"), server.keys(), KeyFormat.TRADITIONAL);
    caFile = TestPki.writeCertificates(dir.resolve("ca.crt"), ca.certificate());
  }

  @AfterEach
  void tearDown() throws InterruptedException {
    RuntimeTeardown.close(channels, runtime);
  }

  /** The runtime with the test certificate and key, plus {@code key=value} settings. */
  private ServerRuntime start(String... settings) throws Exception {
    List<String> all = new ArrayList<>(List.of("grpc.tls.cert_file=" + certFile, "grpc.tls.key_file=" + keyFile));
    all.addAll(List.of(settings));
    runtime = ServerRuntime.start(ServerRuntimeTest.config(all.toArray(String[]::new)));
    return runtime;
  }

  /** A trust manager that trusts the test CA and records every server certificate it was shown. */
  private static final class CapturingTrustManager extends X509ExtendedTrustManager {
    private final X509ExtendedTrustManager delegate;
    final List<X509Certificate> seen = new CopyOnWriteArrayList<>();

    CapturingTrustManager(X509ExtendedTrustManager delegate) {
      this.delegate = delegate;
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      seen.add(chain[0]);
      delegate.checkServerTrusted(chain, authType, engine);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      seen.add(chain[0]);
      delegate.checkServerTrusted(chain, authType, socket);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
      seen.add(chain[0]);
      delegate.checkServerTrusted(chain, authType);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      delegate.checkClientTrusted(chain, authType, engine);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      delegate.checkClientTrusted(chain, authType, socket);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType) throws CertificateException {
      delegate.checkClientTrusted(chain, authType);
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return delegate.getAcceptedIssuers();
    }
  }

  /** A TLS channel with its own SSL context (so no TLS session is resumed from another channel). */
  private ManagedChannel tlsChannel(CapturingTrustManager trust, Issued clientCertificate) throws Exception {
    TlsChannelCredentials.Builder credentials = TlsChannelCredentials.newBuilder().trustManager(trust);
    if (clientCertificate != null) {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      store.setKeyEntry(
          "client",
          clientCertificate.keys().getPrivate(),
          new char[0],
          new X509Certificate[] {clientCertificate.certificate()});
      KeyManagerFactory factory = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      factory.init(store, new char[0]);
      credentials.keyManager(factory.getKeyManagers());
    }
    return channel(credentials.build());
  }

  private ManagedChannel channel(ChannelCredentials credentials) {
    ManagedChannel channel = NettyChannelBuilder.forAddress("localhost", runtime.grpcPort(), credentials).build();
    channels.add(channel);
    return channel;
  }

  private CapturingTrustManager trustingTheCa() throws Exception {
    return new CapturingTrustManager(TestPki.trusting(ca.certificate()));
  }

  private static ServingStatus check(ManagedChannel channel) {
    return HealthGrpc.newBlockingStub(channel)
        .withDeadlineAfter(5, TimeUnit.SECONDS)
        .check(HealthCheckRequest.getDefaultInstance())
        .getStatus();
  }

  private static void assertRejected(ManagedChannel channel) {
    assertThatThrownBy(() -> check(channel))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class,
            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
  }

  @Test
  void servesHealthOverTlsAndRefusesPlaintext() throws Exception {
    start();
    CapturingTrustManager trust = trustingTheCa();

    assertThat(check(tlsChannel(trust, null))).isEqualTo(ServingStatus.SERVING);
    assertThat(trust.seen).isNotEmpty().allSatisfy(c -> assertThat(c).isEqualTo(server.certificate()));
    assertThat(runtime.tlsCertificate()).contains(server.certificate());

    ManagedChannel plaintext =
        NettyChannelBuilder.forAddress("localhost", runtime.grpcPort()).usePlaintext().build();
    channels.add(plaintext);
    assertRejected(plaintext);

    // A client that does not trust the server's CA refuses it.
    Issued otherCa = TestPki.ca("other-ca");
    assertRejected(tlsChannel(new CapturingTrustManager(TestPki.trusting(otherCa.certificate())), null));
  }

  @Test
  void mutualTlsRequiresAClientCertificateFromTheConfiguredCa() throws Exception {
    start("grpc.tls.client_ca_file=" + caFile);

    assertRejected(tlsChannel(trustingTheCa(), null));
    Issued strangerCa = TestPki.ca("stranger-ca");
    assertRejected(tlsChannel(trustingTheCa(), TestPki.client(strangerCa, "stranger")));

    assertThat(check(tlsChannel(trustingTheCa(), TestPki.client(ca, "envoy")))).isEqualTo(ServingStatus.SERVING);
  }

  @Test
  void rotatedCertificateIsServedToNewConnectionsWhileOpenStreamsGoOn() throws Exception {
    start("grpc.tls.reload_interval=200ms", "grpc.tls.client_ca_file=" + caFile);
    Issued envoy = TestPki.client(ca, "envoy");
    CapturingTrustManager firstTrust = trustingTheCa();
    ManagedChannel first = tlsChannel(firstTrust, envoy);

    // An exchange in progress: request headers answered, the request body still to come.
    RawExtProcStream stream = new RawExtProcStream(first);
    ProcessingResponse headersReply =
        stream.exchange(RawExtProcStream.requestHeaders("POST", "/v1/chat/completions", false));
    assertThat(headersReply.hasRequestHeaders()).isTrue();
    assertThat(headersReply.getModeOverride().getRequestBodyMode()).isEqualTo(BodySendMode.STREAMED);
    assertThat(firstTrust.seen).singleElement().isEqualTo(server.certificate());

    // cert-manager writes a renewed certificate (new serial, new key) into the mounted secret.
    Issued renewed = TestPki.server(ca, BigInteger.valueOf(987_654_321L), TestPki.ecKeys());
    replaceAtomically(certFile, f -> TestPki.writeCertificates(f, renewed.certificate(), ca.certificate()));
    replaceAtomically(keyFile, f -> TestPki.writeKey(f, renewed.keys(), KeyFormat.PKCS8));
    awaitServedSerial(renewed.serial());

    // A new connection gets the renewed certificate ...
    CapturingTrustManager secondTrust = trustingTheCa();
    assertThat(check(tlsChannel(secondTrust, envoy))).isEqualTo(ServingStatus.SERVING);
    assertThat(secondTrust.seen).isNotEmpty().allSatisfy(c -> assertThat(c.getSerialNumber()).isEqualTo(renewed.serial()));

    // ... and the stream opened before the rotation is still open and answered, on its old connection.
    ProcessingResponse bodyReply = stream.exchange(RawExtProcStream.requestBody("{\"model\":\"m\"}", true));
    assertThat(bodyReply.hasRequestBody()).isTrue();
    assertThat(stream.closed()).isNotDone();
    assertThat(firstTrust.seen).singleElement().isEqualTo(server.certificate());
    assertThat(check(first)).isEqualTo(ServingStatus.SERVING);
    stream.cancel();
  }

  @Test
  void aHalfRotatedPairKeepsThePreviousCertificateUntilTheKeyArrives() throws Exception {
    start("grpc.tls.reload_interval=200ms");
    Issued renewed = TestPki.server(ca);

    // Only the certificate has been replaced so far: its key is still the old one.
    replaceAtomically(certFile, f -> TestPki.writeCertificates(f, renewed.certificate()));
    awaitReloadPass();
    assertThat(runtime.tlsCertificate()).contains(server.certificate());
    CapturingTrustManager during = trustingTheCa();
    assertThat(check(tlsChannel(during, null))).isEqualTo(ServingStatus.SERVING);
    assertThat(during.seen).isNotEmpty().allSatisfy(c -> assertThat(c).isEqualTo(server.certificate()));

    replaceAtomically(keyFile, f -> TestPki.writeKey(f, renewed.keys(), KeyFormat.TRADITIONAL));
    awaitServedSerial(renewed.serial());
    CapturingTrustManager after = trustingTheCa();
    assertThat(check(tlsChannel(after, null))).isEqualTo(ServingStatus.SERVING);
    assertThat(after.seen).isNotEmpty().allSatisfy(c -> assertThat(c).isEqualTo(renewed.certificate()));
  }

  @Test
  void filesThatVanishOrBreakWhileServingKeepThePreviousCertificate() throws Exception {
    start("grpc.tls.reload_interval=200ms");

    // The secret volume is briefly empty, then holds a truncated certificate.
    Files.delete(keyFile);
    awaitReloadPass();
    assertThat(runtime.tlsCertificate()).contains(server.certificate());
    replaceAtomically(certFile, f -> Files.writeString(f, "-----BEGIN CERTIFICATE-----\nAAAA\n"));
    TestPki.writeKey(keyFile, server.keys(), KeyFormat.PKCS8);
    awaitReloadPass();

    assertThat(runtime.tlsCertificate()).contains(server.certificate());
    CapturingTrustManager trust = trustingTheCa();
    assertThat(check(tlsChannel(trust, null))).isEqualTo(ServingStatus.SERVING);
    assertThat(trust.seen).isNotEmpty().allSatisfy(c -> assertThat(c).isEqualTo(server.certificate()));

    // A good pair again is picked up.
    Issued renewed = TestPki.server(ca);
    replaceAtomically(certFile, f -> TestPki.writeCertificates(f, renewed.certificate()));
    replaceAtomically(keyFile, f -> TestPki.writeKey(f, renewed.keys(), KeyFormat.PKCS8));
    awaitServedSerial(renewed.serial());
  }

  @Test
  void unusableCertificateFilesStopStartUpNamingTheKey() throws Exception {
    Files.writeString(certFile, "not a certificate");
    assertThatThrownBy(this::start)
        .isInstanceOf(StartupException.class)
        .hasMessage("grpc.tls.cert_file " + certFile + ": not a PEM file (no -----BEGIN ...----- block)");

    TestPki.writeCertificates(certFile, server.certificate());
    TestPki.writeKey(keyFile, TestPki.ecKeys(), KeyFormat.PKCS8);
    assertThatThrownBy(this::start)
        .isInstanceOf(StartupException.class)
        .hasMessage("grpc.tls.key_file " + keyFile + ": the private key does not belong to the certificate");
    runtime = null;
  }

  private interface Writer {
    void write(Path file) throws Exception;
  }

  /**
   * Writes the new content beside the file and moves it over, as the kubelet's atomic secret update
   * does; the modification time is set ahead so no reader could mistake it for the old file.
   */
  private static void replaceAtomically(Path file, Writer writer) throws Exception {
    Path next = file.resolveSibling(file.getFileName() + ".next");
    writer.write(next);
    Files.setLastModifiedTime(next, FileTime.from(Instant.now().plusSeconds(5)));
    Files.move(next, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  /** Waits for a reload pass that read the files as they are now, and checks it applied the renewed pair. */
  private void awaitServedSerial(BigInteger serial) throws Exception {
    awaitReloadPass();
    assertThat(runtime.tlsCertificate()).hasValueSatisfying(c -> assertThat(c.getSerialNumber()).isEqualTo(serial));
  }

  /** Waits until a reload pass that started after this call (so saw the files as they are now) is over. */
  private void awaitReloadPass() throws Exception {
    runtime.nextTlsReload().get(5, TimeUnit.SECONDS);
  }
}
