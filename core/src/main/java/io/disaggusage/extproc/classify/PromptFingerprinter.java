package io.disaggusage.extproc.classify;

import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.security.MessageDigest;

/**
 * Computes a request body's {@link PromptFingerprint} from the events a reader sends as the body
 * streams: it picks the top-level members both legs of a flow share and hands their values' events to
 * a {@link CanonicalHasher}; everything else (and the body itself) passes by unhashed.
 *
 * <p>The members, whatever the endpoint (a body carries only its own): {@code model}; {@code messages}
 * (chat, Anthropic Messages); {@code system} (Anthropic Messages); {@code prompt} (completions);
 * {@code input} and {@code instructions} (Responses). Never the members an orchestrator sets or changes between legs
 * ({@code max_tokens}, {@code max_completion_tokens}, {@code max_output_tokens}, {@code stream},
 * {@code stream_options}, {@code store}, sampling parameters, {@code kv_transfer_params}, {@code
 * disaggregated_params}, {@code bootstrap_*}, {@code prompt_token_ids}, …). A member that appears
 * twice counts once, the last one, as in a tree parse.
 *
 * <p>TensorRT-LLM's generation leg replaces a completions {@code prompt} by the context reply's token
 * ids, so in a body that carries a {@code disaggregated_params} object (both of its legs do) {@code
 * prompt} is left out; a chat leg keeps its {@code messages}, which still count.
 *
 * <p>The fingerprint is the first 128 bits of {@code SHA-256("disagg-usage-fingerprint/2", then for each
 * member present, in the fixed order above: its index and its value's canonical digest)}. It is null
 * when the body was not read whole and well-formed, or carried none of the prompt-bearing members
 * (only {@code model}, or a TensorRT-LLM completions body): such a leg is unbound, and an unbound
 * context usage is given only to an unbound generation leg.
 */
final class PromptFingerprinter {
  /** The members fingerprinted, in the order they enter the fingerprint. */
  private enum Member {
    MODEL("model", false),
    MESSAGES("messages", true),
    SYSTEM("system", true),
    PROMPT("prompt", true),
    INPUT("input", true),
    INSTRUCTIONS("instructions", true);

    final String json;
    /** Carries prompt text: a fingerprint needs one such member. */
    final boolean promptBearing;

    Member(String json, boolean promptBearing) {
      this.json = json;
      this.promptBearing = promptBearing;
    }

    static Member named(String name) {
      for (Member m : values()) {
        if (m.json.equals(name)) {
          return m;
        }
      }
      return null;
    }
  }

  private static final byte[] DOMAIN =
      "disagg-usage-fingerprint/2".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

  private final CanonicalHasher hasher = new CanonicalHasher();
  /** Each member's value digest; null until the member has been read. */
  private final byte[][] digests = new byte[Member.values().length][];
  /** Containers open around the current position (0 outside the root object). */
  private int depth;
  /** The top-level member whose value is being hashed; null while others pass by. */
  private Member member;
  private boolean nameIsDisaggregatedParams;
  private boolean trtBody;

  /** Whether the current events go into the fingerprint: the reader must pass their text. */
  boolean hashing() {
    return member != null;
  }

  /** A top-level member name (only called while not {@link #hashing()}); null matches nothing. */
  void name(String name) {
    if (depth != 1) {
      return;
    }
    member = name == null ? null : Member.named(name);
    nameIsDisaggregatedParams = "disaggregated_params".equals(name);
    if (member != null) {
      hasher.reset();
    }
  }

  void startContainer(boolean object) {
    if (depth == 1 && object && nameIsDisaggregatedParams) {
      trtBody = true;
    }
    nameIsDisaggregatedParams = false;
    depth++;
    if (member != null) {
      hasher.startContainer(object);
    }
  }

  void endContainer() {
    depth--;
    if (member != null) {
      hasher.endContainer();
      memberMaybeDone();
    }
  }

  /** A string (or a name inside a hashed value) of {@code utf8Length} bytes, streamed. */
  void startString(long utf8Length) {
    hasher.startString(utf8Length);
  }

  void startBinary(long length) {
    hasher.startBinary(length);
  }

  void startExtension(byte type, long length) {
    hasher.startExtension(type, length);
  }

  void bytes(ByteBuffer bytes) {
    hasher.stringBytes(bytes);
  }

  /** The next UTF-16 piece of a string started with {@link #startString}. */
  void chars(char[] chars, int offset, int length) {
    hasher.stringChars(chars, offset, length);
  }

  void endString() {
    hasher.endString();
    memberMaybeDone();
  }

  /** A whole string or name inside a hashed value, as the JSON reader has it. */
  void string(char[] chars, int offset, int length) {
    hasher.string(chars, offset, length);
    memberMaybeDone();
  }

  /** A whole name inside a hashed value, as the JSON reader has it. */
  void string(String s) {
    hasher.string(s);
    memberMaybeDone();
  }

  void integer(long value) {
    hasher.integer(value);
    memberMaybeDone();
  }

  void integer(BigInteger value) {
    hasher.integer(value);
    memberMaybeDone();
  }

  void floating(double value) {
    hasher.floating(value);
    memberMaybeDone();
  }

  void bool(boolean value) {
    hasher.bool(value);
    memberMaybeDone();
  }

  void nul() {
    hasher.nul();
    memberMaybeDone();
  }

  /**
   * The fingerprint of a body read whole; null when {@code readWhole} is false (not read to its end,
   * malformed) or no prompt-bearing member counts.
   */
  PromptFingerprint fingerprint(boolean readWhole) {
    if (!readWhole || depth != 0 || member != null) {
      return null;
    }
    boolean prompt = false;
    for (Member m : Member.values()) {
      prompt |= m.promptBearing && counts(m);
    }
    if (!prompt) {
      return null;
    }
    MessageDigest sha = hasher.idleDigest();
    sha.update(DOMAIN);
    for (Member m : Member.values()) {
      if (counts(m)) {
        sha.update((byte) m.ordinal());
        sha.update(digests[m.ordinal()]);
      }
    }
    ByteBuffer out = ByteBuffer.wrap(sha.digest());
    return new PromptFingerprint(out.getLong(), out.getLong());
  }

  /** The member was read and enters the fingerprint. */
  private boolean counts(Member m) {
    return digests[m.ordinal()] != null && !(m == Member.PROMPT && trtBody);
  }

  private void memberMaybeDone() {
    if (hasher.complete()) {
      digests[member.ordinal()] = hasher.digest();
      member = null;
    }
  }
}
