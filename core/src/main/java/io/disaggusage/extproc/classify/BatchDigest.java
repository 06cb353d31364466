package io.disaggusage.extproc.classify;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The correlation text of an SGLang {@code bootstrap_room} (or {@code bootstrap_host}) array, sent
 * for {@code n>1} and batched requests: one room per sample, and the same array on the prefill and
 * the decode leg, since SGLang's routers send both legs the same body. The elements are hashed as
 * they are read (SHA-256 over their exact text), so a batch of any size gives a key of fixed length
 * in constant memory. An element that is not an id (null, a float, a nested container) spoils it:
 * no key rather than one two different batches could share.
 */
final class BatchDigest {
  private final MessageDigest sha256;
  private int elements;
  private boolean spoiled;

  BatchDigest() {
    try {
      sha256 = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }

  /** The next element's exact text; null when it is not an id. */
  void add(String text) {
    if (text == null) {
      spoil();
      return;
    }
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    // Length-prefixed, so ["1","23"] and ["12","3"] differ.
    sha256.update((byte) (bytes.length >>> 24));
    sha256.update((byte) (bytes.length >>> 16));
    sha256.update((byte) (bytes.length >>> 8));
    sha256.update((byte) bytes.length);
    sha256.update(bytes);
    elements++;
  }

  void spoil() {
    spoiled = true;
  }

  /** {@code batch<n>:<hex digest>}; null for an empty or spoiled array. */
  String key() {
    if (spoiled || elements == 0) {
      return null;
    }
    try {
      MessageDigest copy = (MessageDigest) sha256.clone();
      return "batch" + elements + ":" + HexFormat.of().formatHex(copy.digest());
    } catch (CloneNotSupportedException e) {
      throw new IllegalStateException("SHA-256 digests can be cloned", e);
    }
  }
}
