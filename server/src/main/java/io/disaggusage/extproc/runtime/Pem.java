package io.disaggusage.extproc.runtime;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads PEM certificates and private keys as cert-manager, openssl and Kubernetes secrets write them:
 * {@code CERTIFICATE} blocks, and a {@code PRIVATE KEY} (PKCS#8), {@code RSA PRIVATE KEY} (PKCS#1) or
 * {@code EC PRIVATE KEY} (SEC1) block. Encrypted keys are not supported. Messages name no key material.
 */
final class Pem {
  private static final Pattern BLOCK =
      Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([A-Za-z0-9+/=\\s]*?)-----END \\1-----");

  /** DER of AlgorithmIdentifier {rsaEncryption, NULL}. */
  private static final byte[] RSA_ALGORITHM = {
    0x30, 0x0d, 0x06, 0x09, 0x2a, (byte) 0x86, 0x48, (byte) 0x86, (byte) 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00
  };
  /** DER of the OID id-ecPublicKey (1.2.840.10045.2.1). */
  private static final byte[] EC_PUBLIC_KEY_OID = {0x06, 0x07, 0x2a, (byte) 0x86, 0x48, (byte) 0xce, 0x3d, 0x02, 0x01};
  /** DER of INTEGER 0, the PKCS#8 version. */
  private static final byte[] VERSION_0 = {0x02, 0x01, 0x00};

  private Pem() {}

  /** One decoded PEM block. */
  private record Block(String label, byte[] der) {}

  /** The certificates in {@code pem}, in file order (leaf first for a server chain). */
  static X509Certificate[] certificates(byte[] pem) throws GeneralSecurityException {
    CertificateFactory factory = CertificateFactory.getInstance("X.509");
    List<X509Certificate> certificates = new ArrayList<>();
    for (Block block : blocks(pem)) {
      if (block.label().equals("CERTIFICATE")) {
        certificates.add(
            (X509Certificate) factory.generateCertificate(new ByteArrayInputStream(block.der())));
      }
    }
    if (certificates.isEmpty()) {
      throw new CertificateException("no PEM CERTIFICATE block found");
    }
    return certificates.toArray(new X509Certificate[0]);
  }

  /** The first private key in {@code pem}. */
  static PrivateKey privateKey(byte[] pem) throws GeneralSecurityException {
    for (Block block : blocks(pem)) {
      switch (block.label()) {
        case "PRIVATE KEY":
          return pkcs8(block.der());
        case "RSA PRIVATE KEY":
          return KeyFactory.getInstance("RSA")
              .generatePrivate(
                  new PKCS8EncodedKeySpec(sequence(VERSION_0, RSA_ALGORITHM, tlv(0x04, block.der()))));
        case "EC PRIVATE KEY":
          return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(sec1ToPkcs8(block.der())));
        case "ENCRYPTED PRIVATE KEY":
          throw new InvalidKeySpecException("encrypted private keys are not supported; store the key unencrypted");
        default:
          // certificates or parameters before the key: skip
      }
    }
    throw new InvalidKeySpecException(
        "no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block found");
  }

  /**
   * Fails unless {@code key} is the private key of {@code certificate}: a signature made with the key
   * must verify with the certificate's public key. Catches a certificate and key from different
   * rotations.
   */
  static void checkKeyMatches(PrivateKey key, X509Certificate certificate) throws GeneralSecurityException {
    String algorithm =
        switch (key.getAlgorithm()) {
          case "RSA" -> "SHA256withRSA";
          case "EC" -> "SHA256withECDSA";
          default -> throw new InvalidKeySpecException("unsupported key algorithm " + key.getAlgorithm());
        };
    byte[] challenge = new byte[32];
    new SecureRandom().nextBytes(challenge);
    Signature signer = Signature.getInstance(algorithm);
    signer.initSign(key);
    signer.update(challenge);
    byte[] signature = signer.sign();
    Signature verifier = Signature.getInstance(algorithm);
    try {
      verifier.initVerify(certificate.getPublicKey());
      verifier.update(challenge);
      if (verifier.verify(signature)) {
        return;
      }
    } catch (GeneralSecurityException e) {
      // a key of another algorithm than the certificate's: reported below
    }
    throw new InvalidKeySpecException("the private key does not belong to the certificate");
  }

  private static PrivateKey pkcs8(byte[] der) throws GeneralSecurityException {
    PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
    for (String algorithm : new String[] {"RSA", "EC"}) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(spec);
      } catch (InvalidKeySpecException e) {
        // try the next algorithm
      }
    }
    throw new InvalidKeySpecException("not an RSA or EC private key (PKCS#8)");
  }

  private static List<Block> blocks(byte[] pem) throws GeneralSecurityException {
    String text = new String(pem, StandardCharsets.US_ASCII);
    List<Block> blocks = new ArrayList<>();
    Matcher m = BLOCK.matcher(text);
    while (m.find()) {
      try {
        blocks.add(new Block(m.group(1), Base64.getMimeDecoder().decode(m.group(2))));
      } catch (IllegalArgumentException e) {
        throw new CertificateException("invalid base64 in a PEM " + m.group(1) + " block");
      }
    }
    if (blocks.isEmpty()) {
      throw new CertificateException("not a PEM file (no -----BEGIN ...----- block)");
    }
    return blocks;
  }

  /**
   * Wraps a SEC1 {@code ECPrivateKey} (version, key, [0] curve, [1] public key) in PKCS#8 with the curve
   * it names.
   */
  private static byte[] sec1ToPkcs8(byte[] sec1) throws InvalidKeySpecException {
    Der outer = new Der(sec1);
    Der fields = outer.enter(0x30);
    fields.skip(0x02); // version 1
    fields.skip(0x04); // the private key
    byte[] curve = null;
    while (fields.hasMore()) {
      int tag = fields.peekTag();
      if (tag == 0xa0) {
        curve = fields.enter(0xa0).element(0x06);
      } else {
        fields.skip(tag);
      }
    }
    if (curve == null) {
      throw new InvalidKeySpecException("EC PRIVATE KEY without its curve parameters");
    }
    return sequence(VERSION_0, sequence(EC_PUBLIC_KEY_OID, curve), tlv(0x04, sec1));
  }

  private static byte[] sequence(byte[]... parts) {
    ByteArrayOutputStream content = new ByteArrayOutputStream();
    for (byte[] part : parts) {
      content.writeBytes(part);
    }
    return tlv(0x30, content.toByteArray());
  }

  private static byte[] tlv(int tag, byte[] content) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(content.length + 6);
    out.write(tag);
    int length = content.length;
    if (length < 0x80) {
      out.write(length);
    } else {
      int bytes = (32 - Integer.numberOfLeadingZeros(length) + 7) / 8;
      out.write(0x80 | bytes);
      for (int i = bytes - 1; i >= 0; i--) {
        out.write(length >>> (8 * i));
      }
    }
    out.writeBytes(content);
    return out.toByteArray();
  }

  /** A minimal DER reader over one run of elements. */
  private static final class Der {
    private final byte[] data;
    private int pos;
    private final int end;

    Der(byte[] data) {
      this(data, 0, data.length);
    }

    private Der(byte[] data, int from, int end) {
      this.data = data;
      this.pos = from;
      this.end = end;
    }

    boolean hasMore() {
      return pos < end;
    }

    int peekTag() throws InvalidKeySpecException {
      if (pos >= end) {
        throw malformed();
      }
      return data[pos] & 0xff;
    }

    /** The contents of the next element, which must have {@code tag}, as a reader. */
    Der enter(int tag) throws InvalidKeySpecException {
      int[] range = next(tag);
      return new Der(data, range[0], range[1]);
    }

    /** The next element, which must have {@code tag}, whole (tag and length included). */
    byte[] element(int tag) throws InvalidKeySpecException {
      int start = pos;
      int[] range = next(tag);
      byte[] out = new byte[range[1] - start];
      System.arraycopy(data, start, out, 0, out.length);
      return out;
    }

    void skip(int tag) throws InvalidKeySpecException {
      next(tag);
    }

    private int[] next(int tag) throws InvalidKeySpecException {
      if (peekTag() != tag) {
        throw malformed();
      }
      pos++;
      if (pos >= end) {
        throw malformed();
      }
      int first = data[pos++] & 0xff;
      int length;
      if (first < 0x80) {
        length = first;
      } else {
        int bytes = first & 0x7f;
        if (bytes == 0 || bytes > 3 || pos + bytes > end) {
          throw malformed();
        }
        length = 0;
        for (int i = 0; i < bytes; i++) {
          length = (length << 8) | (data[pos++] & 0xff);
        }
      }
      if (length > end - pos) {
        throw malformed();
      }
      int from = pos;
      pos += length;
      return new int[] {from, pos};
    }

    private static InvalidKeySpecException malformed() {
      return new InvalidKeySpecException("malformed EC PRIVATE KEY");
    }
  }
}
