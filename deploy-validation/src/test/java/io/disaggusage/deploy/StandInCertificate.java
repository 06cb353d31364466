package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.Map;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * The certificate files a TLS context names ({@code trusted_ca}, {@code certificate_chain},
 * {@code private_key}) live on the deployment's machine, and Envoy reads them while validating. Here
 * they are replaced by one generated self-signed certificate (a CA, so it can be trusted too) and its
 * key, so Envoy judges the rest of the TLS context.
 */
final class StandInCertificate {
  private StandInCertificate() {}

  /** A copy of {@code config} whose certificate and key files are the stand-ins, written to {@code dir}. */
  static JsonNode substitute(JsonNode config, Path dir) throws IOException, GeneralSecurityException, OperatorCreationException {
    JsonNode copy = config.deepCopy();
    if (!copy.toString().contains("\"filename\"")) {
      return copy;
    }
    KeyPair keys = keys();
    Path certificate = Files.writeString(dir.resolve("stand-in.crt"), pem(certificate(keys)));
    Path key = Files.writeString(dir.resolve("stand-in.key"), pem(new JcaPKCS8Generator(keys.getPrivate(), null)));
    Map<String, Path> files = Map.of(
        "trusted_ca", certificate, "certificate_chain", certificate, "private_key", key);
    replace(copy, files);
    return copy;
  }

  private static void replace(JsonNode node, Map<String, Path> files) {
    if (node instanceof ObjectNode object) {
      files.forEach((field, file) -> {
        if (object.path(field).has("filename")) {
          ((ObjectNode) object.get(field)).put("filename", file.toString());
        }
      });
    }
    node.forEach(child -> replace(child, files));
  }

  private static KeyPair keys() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
    generator.initialize(new ECGenParameterSpec("secp256r1"));
    return generator.generateKeyPair();
  }

  private static Object certificate(KeyPair keys) throws IOException, GeneralSecurityException, OperatorCreationException {
    X500Name name = new X500Name("CN=stand-in");
    Instant now = Instant.now();
    var builder = new JcaX509v3CertificateBuilder(name, BigInteger.ONE, Date.from(now.minus(Duration.ofHours(1))),
        Date.from(now.plus(Duration.ofDays(1))), name, keys.getPublic());
    builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(true));
    return new JcaX509CertificateConverter()
        .getCertificate(builder.build(new JcaContentSignerBuilder("SHA256withECDSA").build(keys.getPrivate())));
  }

  private static String pem(Object object) throws IOException {
    StringWriter text = new StringWriter();
    try (JcaPEMWriter writer = new JcaPEMWriter(text)) {
      writer.writeObject(object);
    }
    return text.toString();
  }
}
