package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.io.StringWriter;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;
import org.bouncycastle.asn1.pkcs.PrivateKeyInfo;
import org.bouncycastle.asn1.sec.ECPrivateKey;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.asn1.x509.SubjectPublicKeyInfo;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.bouncycastle.util.io.pem.PemObject;

/**
 * A throw-away PKI for the TLS tests: a CA, server certificates (SAN {@code localhost} and {@code
 * 127.0.0.1}) and client certificates, written as PEM the way cert-manager or openssl write them.
 */
public final class TestPki {
  /** A certificate and its key pair. */
  public record Issued(X509Certificate certificate, KeyPair keys) {
    public BigInteger serial() {
      return certificate.getSerialNumber();
    }
  }

  /** How a private key is written. */
  public enum KeyFormat {
    /** {@code PRIVATE KEY}. */
    PKCS8,
    /** {@code RSA PRIVATE KEY} or {@code EC PRIVATE KEY}, as openssl's and cert-manager's default. */
    TRADITIONAL
  }

  private static long nextSerial = 1000;

  private TestPki() {}

  public static KeyPair ecKeys() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
    generator.initialize(new ECGenParameterSpec("secp256r1"));
    return generator.generateKeyPair();
  }

  public static KeyPair rsaKeys() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("RSA");
    generator.initialize(2048);
    return generator.generateKeyPair();
  }

  public static synchronized BigInteger newSerial() {
    return BigInteger.valueOf(nextSerial++);
  }

  /** A self-signed CA. */
  public static Issued ca(String name) throws Exception {
    KeyPair keys = ecKeys();
    X500Name subject = new X500Name("CN=" + name);
    X509v3CertificateBuilder builder = builder(subject, subject, newSerial(), keys);
    JcaX509ExtensionUtils utils = new JcaX509ExtensionUtils();
    builder
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(true))
        .addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign))
        .addExtension(Extension.subjectKeyIdentifier, false, utils.createSubjectKeyIdentifier(keys.getPublic()));
    return new Issued(sign(builder, keys), keys);
  }

  /** A server certificate for {@code localhost} and {@code 127.0.0.1}, issued by {@code ca}. */
  public static Issued server(Issued ca, BigInteger serial, KeyPair keys) throws Exception {
    X509v3CertificateBuilder builder =
        builder(new X500Name("CN=disagg-usage-extproc"), issuer(ca), serial, keys);
    builder
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(false))
        .addExtension(
            Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyEncipherment))
        .addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(KeyPurposeId.id_kp_serverAuth))
        .addExtension(
            Extension.subjectAlternativeName,
            false,
            new GeneralNames(
                new GeneralName[] {
                  new GeneralName(GeneralName.dNSName, "localhost"),
                  new GeneralName(GeneralName.iPAddress, "127.0.0.1")
                }));
    return new Issued(sign(builder, ca.keys()), keys);
  }

  public static Issued server(Issued ca) throws Exception {
    return server(ca, newSerial(), ecKeys());
  }

  /** A client certificate (as Envoy presents for mTLS), issued by {@code ca}. */
  public static Issued client(Issued ca, String name) throws Exception {
    KeyPair keys = ecKeys();
    X509v3CertificateBuilder builder = builder(new X500Name("CN=" + name), issuer(ca), newSerial(), keys);
    builder
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(false))
        .addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature))
        .addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(KeyPurposeId.id_kp_clientAuth));
    return new Issued(sign(builder, ca.keys()), keys);
  }

  /** Writes the certificate (and any chain after it) as PEM. */
  public static Path writeCertificates(Path file, X509Certificate... certificates) throws IOException {
    StringWriter text = new StringWriter();
    try (JcaPEMWriter pem = new JcaPEMWriter(text)) {
      for (X509Certificate certificate : certificates) {
        pem.writeObject(certificate);
      }
    }
    Files.writeString(file, text.toString());
    return file;
  }

  public static Path writeKey(Path file, KeyPair keys, KeyFormat format) throws IOException {
    StringWriter text = new StringWriter();
    try (JcaPEMWriter pem = new JcaPEMWriter(text)) {
      if (format == KeyFormat.PKCS8) {
        pem.writeObject(new JcaPKCS8Generator(keys.getPrivate(), null));
      } else if (keys.getPrivate().getAlgorithm().equals("EC")) {
        // openssl's SEC1 form names its curve and carries the public key; the JDK's inner encoding does not
        PrivateKeyInfo info = PrivateKeyInfo.getInstance(keys.getPrivate().getEncoded());
        ECPrivateKey inner = ECPrivateKey.getInstance(info.parsePrivateKey());
        ECPrivateKey sec1 =
            new ECPrivateKey(
                256,
                inner.getKey(),
                SubjectPublicKeyInfo.getInstance(keys.getPublic().getEncoded()).getPublicKeyData(),
                info.getPrivateKeyAlgorithm().getParameters());
        pem.writeObject(new PemObject("EC PRIVATE KEY", sec1.getEncoded()));
      } else {
        pem.writeObject(keys.getPrivate());
      }
    }
    Files.writeString(file, text.toString());
    return file;
  }

  /** A JDK trust manager that trusts exactly {@code ca}. */
  public static X509ExtendedTrustManager trusting(X509Certificate ca) throws GeneralSecurityException, IOException {
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    store.load(null, null);
    store.setCertificateEntry("ca", ca);
    TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    factory.init(store);
    return (X509ExtendedTrustManager) factory.getTrustManagers()[0];
  }

  private static X500Name issuer(Issued ca) {
    return X500Name.getInstance(ca.certificate().getSubjectX500Principal().getEncoded());
  }

  private static X509v3CertificateBuilder builder(
      X500Name subject, X500Name issuer, BigInteger serial, KeyPair keys) {
    Instant now = Instant.now();
    return new JcaX509v3CertificateBuilder(
        issuer,
        serial,
        Date.from(now.minus(Duration.ofHours(1))),
        Date.from(now.plus(Duration.ofDays(1))),
        subject,
        keys.getPublic());
  }

  private static X509Certificate sign(X509v3CertificateBuilder builder, KeyPair signer)
      throws OperatorCreationException, GeneralSecurityException {
    String algorithm = signer.getPrivate().getAlgorithm().equals("RSA") ? "SHA256withRSA" : "SHA256withECDSA";
    return new JcaX509CertificateConverter()
        .getCertificate(builder.build(new JcaContentSignerBuilder(algorithm).build(signer.getPrivate())));
  }
}
