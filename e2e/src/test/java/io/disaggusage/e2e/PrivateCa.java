package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.TestPki;
import io.disaggusage.extproc.testkit.TestPki.Issued;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * A private CA made for one test ({@link TestPki}'s) and what each side needs of it: for a server, PEM files
 * of the CA and of a certificate for {@code 127.0.0.1} and {@code localhost} with its key; for the service's
 * JVM, a PKCS12 trust store holding only the CA under a random password, and a {@code java} argument file
 * naming them ({@code javax.net.ssl.trustStore*}), so the password is on no command line and in no
 * echoed variable. The trust store and the argument file are readable by their owner only.
 */
final class PrivateCa {
  private static final SecureRandom RANDOM = new SecureRandom();

  private final Path certificate;
  private final Path serverCertificate;
  private final Path serverKey;
  private final Path trustStore;
  private final String trustStorePassword;
  private final Path jvmOptions;

  private PrivateCa(Path certificate, Path serverCertificate, Path serverKey, Path trustStore, String trustStorePassword,
      Path jvmOptions) {
    this.certificate = certificate;
    this.serverCertificate = serverCertificate;
    this.serverKey = serverKey;
    this.trustStore = trustStore;
    this.trustStorePassword = trustStorePassword;
    this.jvmOptions = jvmOptions;
  }

  /** A new CA and server certificate, written to a fresh folder {@code <name>-pki} beside the logs. */
  static PrivateCa create(String name) {
    try {
      Path directory = Tools.emptyFolder(name + "-pki");
      Issued ca = TestPki.ca(name + " private CA");
      Issued server = TestPki.server(ca);
      Path certificate = TestPki.writeCertificates(directory.resolve("ca.crt"), ca.certificate());
      Path serverCertificate = TestPki.writeCertificates(directory.resolve("redis.crt"), server.certificate());
      Path serverKey = ownerOnly(TestPki.writeKey(directory.resolve("redis.key"), server.keys(), TestPki.KeyFormat.PKCS8));

      String password = newSecret();
      Path trustStore = directory.resolve("truststore.p12");
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      store.setCertificateEntry("private-ca", ca.certificate());
      try (OutputStream out = Files.newOutputStream(trustStore)) {
        store.store(out, password.toCharArray());
      }
      ownerOnly(trustStore);
      Path jvmOptions = directory.resolve("truststore.jvm-options");
      Files.writeString(jvmOptions, String.join("\n",
          quoted("-Djavax.net.ssl.trustStore=" + trustStore),
          "-Djavax.net.ssl.trustStoreType=PKCS12",
          quoted("-Djavax.net.ssl.trustStorePassword=" + password),
          ""));
      ownerOnly(jvmOptions);
      return new PrivateCa(certificate, serverCertificate, serverKey, trustStore, password, jvmOptions);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (Exception e) {
      throw new IllegalStateException("cannot make a private CA", e);
    }
  }

  /** 24 random hexadecimal digits: a password no log line holds by chance. */
  static String newSecret() {
    byte[] bytes = new byte[12];
    RANDOM.nextBytes(bytes);
    return HexFormat.of().formatHex(bytes);
  }

  /** The CA certificate (PEM). */
  Path certificate() {
    return certificate;
  }

  /** The server certificate (PEM), for {@code 127.0.0.1} and {@code localhost}. */
  Path serverCertificate() {
    return serverCertificate;
  }

  /** The server certificate's private key (PEM, PKCS#8). */
  Path serverKey() {
    return serverKey;
  }

  Path trustStore() {
    return trustStore;
  }

  String trustStorePassword() {
    return trustStorePassword;
  }

  /**
   * {@code @file}: the {@code java} argument naming the trust store, its type and its password, on a
   * command line or in {@code JDK_JAVA_OPTIONS} (whose echo shows only this file's name).
   */
  String jvmOptionsArgument() {
    return "@" + jvmOptions;
  }

  /** The README's command ({@link InstalledTools#serviceCommand()}) with {@link #jvmOptionsArgument()} after {@code java}. */
  List<String> serviceCommand() {
    List<String> command = new ArrayList<>(InstalledTools.serviceCommand());
    command.add(1, jvmOptionsArgument());
    return command;
  }

  /** A whole argument in a java argument file: double quotes, so a space in a path does not split it. */
  private static String quoted(String argument) {
    return "\"" + argument.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  private static Path ownerOnly(Path file) throws IOException {
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
    return file;
  }
}
