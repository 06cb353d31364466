package io.disaggusage.extproc.runtime;

import io.disaggusage.extproc.testkit.TestPki;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.testkit.TestPki.Issued;
import io.disaggusage.extproc.testkit.TestPki.KeyFormat;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.security.interfaces.ECPrivateKey;
import java.security.interfaces.RSAPrivateKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class PemTest {
  @TempDir Path dir;

  @ParameterizedTest
  @CsvSource({
    "EC, PKCS8, -----BEGIN PRIVATE KEY-----",
    "EC, TRADITIONAL, -----BEGIN EC PRIVATE KEY-----",
    "RSA, PKCS8, -----BEGIN PRIVATE KEY-----",
    "RSA, TRADITIONAL, -----BEGIN RSA PRIVATE KEY-----"
  })
  void readsTheKeyFormatsCertManagerAndOpensslWrite(String algorithm, KeyFormat format, String header)
      throws Exception {
    Issued ca = TestPki.ca("pem-ca");
    KeyPair keys = algorithm.equals("RSA") ? TestPki.rsaKeys() : TestPki.ecKeys();
    Issued server = TestPki.server(ca, TestPki.newSerial(), keys);
    byte[] keyPem = Files.readAllBytes(TestPki.writeKey(dir.resolve("tls.key"), keys, format));
    assertThat(new String(keyPem, StandardCharsets.US_ASCII)).startsWith(header);

    PrivateKey key = Pem.privateKey(keyPem);

    assertThat(key.getAlgorithm()).isEqualTo(algorithm);
    if (key instanceof ECPrivateKey ec) {
      assertThat(ec.getS()).isEqualTo(((ECPrivateKey) keys.getPrivate()).getS());
      assertThat(ec.getParams().getCurve()).isEqualTo(((ECPrivateKey) keys.getPrivate()).getParams().getCurve());
    } else {
      assertThat(((RSAPrivateKey) key).getPrivateExponent())
          .isEqualTo(((RSAPrivateKey) keys.getPrivate()).getPrivateExponent());
    }
    Pem.checkKeyMatches(key, server.certificate());
  }

  @Test
  void readsAChainInFileOrder() throws Exception {
    Issued ca = TestPki.ca("chain-ca");
    Issued server = TestPki.server(ca);
    Path file = TestPki.writeCertificates(dir.resolve("chain.crt"), server.certificate(), ca.certificate());
    Files.writeString(file, "subject=CN = disagg-usage-extproc\n" + Files.readString(file));

    X509Certificate[] chain = Pem.certificates(Files.readAllBytes(file));

    assertThat(chain).containsExactly(server.certificate(), ca.certificate());
  }

  @Test
  void aKeyFromAnotherRotationIsRejected() throws Exception {
    Issued ca = TestPki.ca("mismatch-ca");
    Issued server = TestPki.server(ca);
    PrivateKey other = TestPki.ecKeys().getPrivate();
    PrivateKey rsa = TestPki.rsaKeys().getPrivate();

    assertThatThrownBy(() -> Pem.checkKeyMatches(other, server.certificate()))
        .isInstanceOf(GeneralSecurityException.class)
        .hasMessage("the private key does not belong to the certificate");
    assertThatThrownBy(() -> Pem.checkKeyMatches(rsa, server.certificate()))
        .isInstanceOf(GeneralSecurityException.class)
        .hasMessage("the private key does not belong to the certificate");
  }

  @Test
  void unusableFilesAreExplainedWithoutTheirContent() {
    byte[] notPem = "secret-looking text".getBytes(StandardCharsets.US_ASCII);
    assertThatThrownBy(() -> Pem.certificates(notPem))
        .isInstanceOf(GeneralSecurityException.class)
        .hasMessage("not a PEM file (no -----BEGIN ...----- block)");
    assertThatThrownBy(() -> Pem.privateKey(notPem))
        .hasMessage("not a PEM file (no -----BEGIN ...----- block)");

    byte[] encrypted =
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
            .getBytes(StandardCharsets.US_ASCII);
    assertThatThrownBy(() -> Pem.privateKey(encrypted))
        .hasMessage("encrypted private keys are not supported; store the key unencrypted");

    byte[] onlyCertificate =
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".getBytes(StandardCharsets.US_ASCII);
    assertThatThrownBy(() -> Pem.privateKey(onlyCertificate))
        .hasMessage("no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block found");

    byte[] onlyKey =
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII);
    assertThatThrownBy(() -> Pem.certificates(onlyKey)).hasMessage("no PEM CERTIFICATE block found");

    byte[] truncatedEc =
        "-----BEGIN EC PRIVATE KEY-----\nMAMCAQE=\n-----END EC PRIVATE KEY-----\n".getBytes(StandardCharsets.US_ASCII);
    assertThatThrownBy(() -> Pem.privateKey(truncatedEc)).hasMessage("malformed EC PRIVATE KEY");
  }
}
