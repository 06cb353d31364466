package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.util.AdvancedTlsX509KeyManager;
import io.grpc.util.AdvancedTlsX509TrustManager;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gRPC listener's TLS: a grpc-util {@link AdvancedTlsX509KeyManager} holding the server certificate
 * and, with {@code grpc.tls.client_ca_file}, an {@link AdvancedTlsX509TrustManager} holding the client
 * CA (client certificates then required).
 *
 * <p>The files are re-read every {@code grpc.tls.reload_interval} on a daemon thread of their own. When
 * their content changed, the new certificate, key and CA are parsed, the key is checked against the
 * certificate, and the managers are updated in place: new handshakes use the new certificate, open
 * connections and their streams are untouched. A file that cannot be read or parsed, or a key that does
 * not match its certificate (a rotation seen half-way), keeps the previous credentials and is retried at
 * the next interval. grpc-util's own file watching is not used: it re-reads at most once a minute,
 * needs both files' modification times to change, and reads PKCS#8 keys only.
 */
final class ServerTls implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ServerTls.class);

  /** Name of the daemon thread that re-reads the certificate files. */
  static final String RELOAD_THREAD_NAME = "disagg-usage-tls-reload";

  private final Config.Tls config;
  private final AdvancedTlsX509KeyManager keyManager = new AdvancedTlsX509KeyManager();
  private final AdvancedTlsX509TrustManager trustManager;
  private final ScheduledExecutorService reloader;

  /** Digest of the files' contents last applied, and of the last contents that failed (logged once). */
  private byte[] applied;
  private byte[] failed;
  /** True while a reload pass could not read the files (their warning is logged once). */
  private boolean unreadable;
  private volatile X509Certificate certificate;
  /** Completed at the end of the next reload pass to start (see {@link #nextReload()}). */
  private final Queue<CompletableFuture<Void>> nextReload = new ConcurrentLinkedQueue<>();

  private ServerTls(Config.Tls config, AdvancedTlsX509TrustManager trustManager) {
    this.config = config;
    this.trustManager = trustManager;
    ScheduledThreadPoolExecutor executor =
        new ScheduledThreadPoolExecutor(1, DaemonThreads.named(RELOAD_THREAD_NAME));
    executor.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    this.reloader = executor;
  }

  /**
   * Loads the files once (failing start-up with a message naming the key when they are unusable) and
   * schedules the periodic reload.
   */
  static ServerTls start(Config.Tls config) throws StartupException {
    AdvancedTlsX509TrustManager trustManager = null;
    if (config.clientAuth()) {
      try {
        trustManager =
            AdvancedTlsX509TrustManager.newBuilder()
                .setVerification(AdvancedTlsX509TrustManager.Verification.CERTIFICATE_ONLY_VERIFICATION)
                .build();
      } catch (GeneralSecurityException e) {
        throw new StartupException("grpc.tls.client_ca_file: cannot create the trust manager: " + e.getMessage(), e);
      }
    }
    ServerTls tls = new ServerTls(config, trustManager);
    try {
      tls.load(true);
    } catch (StartupException | RuntimeException e) {
      tls.close();
      throw e;
    }
    long period = config.reloadInterval().toNanos();
    tls.reloader.scheduleWithFixedDelay(tls::reload, period, period, TimeUnit.NANOSECONDS);
    return tls;
  }

  /** Credentials for {@code NettyServerBuilder.forAddress(address, credentials)}. */
  ServerCredentials credentials() {
    TlsServerCredentials.Builder builder = TlsServerCredentials.newBuilder().keyManager(keyManager);
    if (trustManager != null) {
      builder.trustManager(trustManager).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
    }
    return builder.build();
  }

  /**
   * Credentials for the warm-up's private twin of the listener: the same certificate, and no client
   * certificate asked for, since the warm-up's client has none.
   */
  ServerCredentials warmupCredentials() {
    return TlsServerCredentials.newBuilder().keyManager(keyManager).build();
  }

  /** The leaf certificate new handshakes present. */
  X509Certificate certificate() {
    return certificate;
  }

  /**
   * Completes when the next reload pass to start has finished: that pass read the files as they were
   * after this call. Lets a test wait for the reloader instead of sleeping through its interval.
   */
  CompletableFuture<Void> nextReload() {
    CompletableFuture<Void> done = new CompletableFuture<>();
    nextReload.add(done);
    return done;
  }

  /** One reload pass: applies changed files, keeps the previous credentials on any problem. */
  void reload() {
    List<CompletableFuture<Void>> waiting = new ArrayList<>();
    for (CompletableFuture<Void> f = nextReload.poll(); f != null; f = nextReload.poll()) {
      waiting.add(f);
    }
    try {
      load(false);
    } catch (StartupException | RuntimeException e) {
      // load(false) reports file problems itself and keeps the previous credentials; this is the rest
      log.warn("TLS reload failed: {}; still serving the previous certificate", e.toString());
    } finally {
      waiting.forEach(f -> f.complete(null));
    }
  }

  private synchronized void load(boolean initial) throws StartupException {
    byte[] certPem = read("grpc.tls.cert_file", config.certFile(), initial);
    byte[] keyPem = read("grpc.tls.key_file", config.keyFile(), initial);
    byte[] caPem = config.clientAuth() ? read("grpc.tls.client_ca_file", config.clientCaFile(), initial) : null;
    if (certPem == null || keyPem == null || (config.clientAuth() && caPem == null)) {
      unreadable = true; // during a reload: logged by read() once, retried next time
      return;
    }
    unreadable = false;
    byte[] digest = digest(certPem, keyPem, caPem);
    if (Arrays.equals(digest, applied) || (!initial && Arrays.equals(digest, failed))) {
      return;
    }
    X509Certificate[] chain;
    PrivateKey key;
    X509Certificate[] clientCas = null;
    String failingKey = "grpc.tls.cert_file";
    try {
      chain = Pem.certificates(certPem);
      failingKey = "grpc.tls.key_file";
      key = Pem.privateKey(keyPem);
      Pem.checkKeyMatches(key, chain[0]);
      if (caPem != null) {
        failingKey = "grpc.tls.client_ca_file";
        clientCas = Pem.certificates(caPem);
      }
    } catch (GeneralSecurityException e) {
      String file =
          switch (failingKey) {
            case "grpc.tls.cert_file" -> config.certFile();
            case "grpc.tls.key_file" -> config.keyFile();
            default -> config.clientCaFile();
          };
      String message = failingKey + " " + file + ": " + e.getMessage();
      if (initial) {
        throw new StartupException(message, e);
      }
      failed = digest;
      log.warn(
          "TLS reload: {}; still serving the previous certificate (serial {}) until the files change"
              + " (checked every {})",
          message,
          certificate.getSerialNumber().toString(16),
          ConfigLoader.formatDuration(config.reloadInterval()));
      return;
    }
    if (clientCas != null) {
      try {
        trustManager.updateTrustCredentials(clientCas);
      } catch (IOException | GeneralSecurityException e) {
        String message = "grpc.tls.client_ca_file " + config.clientCaFile() + ": " + e.getMessage();
        if (initial) {
          throw new StartupException(message, e);
        }
        failed = digest;
        log.warn("TLS reload: {}; still serving the previous certificate and client CA", message);
        return;
      }
    }
    keyManager.updateIdentityCredentials(chain, key);
    applied = digest;
    failed = null;
    certificate = chain[0];
    log.info(
        "TLS certificate {}: subject {}, serial {}, valid until {}{}",
        initial ? "loaded" : "reloaded",
        chain[0].getSubjectX500Principal().getName(),
        chain[0].getSerialNumber().toString(16),
        chain[0].getNotAfter().toInstant(),
        clientCas == null ? "" : "; client certificates required, " + clientCas.length + " CA certificate(s)");
  }

  /** The file's bytes; null during a reload when it cannot be read (logged). */
  private byte[] read(String key, String file, boolean initial) throws StartupException {
    try {
      return Files.readAllBytes(Path.of(file));
    } catch (IOException e) {
      String message = key + " " + file + ": cannot read: " + e;
      if (initial) {
        throw new StartupException(message, e);
      }
      if (!unreadable) {
        log.warn("TLS reload: {}; still serving the previous certificate", message);
      }
      return null;
    }
  }

  private static byte[] digest(byte[]... parts) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (byte[] part : parts) {
        if (part != null) {
          sha.update(part);
        }
        sha.update((byte) 0);
      }
      return sha.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JVM", e);
    }
  }

  /** Stops the periodic reload. */
  @Override
  public void close() {
    reloader.shutdownNow();
  }
}
