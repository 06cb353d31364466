package io.disaggusage.extproc.emulator.engines;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A deterministic stand-in for a model's tokenizer: every word (run of letters), number (run of
 * digits) and other non-space character is one token, its id a hash of its text. The same text always
 * gives the same ids, so a prefix cache over them behaves like one over a real tokenizer's output; the
 * counts are not a real model's.
 *
 * <p>A chat prompt is rendered like a chat template: each message starts with a role marker token, and
 * an assistant marker ends the prompt.
 */
public final class WordTokenizer {
  /** Ids of ordinary tokens are below this (Llama 3's regular vocabulary size). */
  public static final int VOCABULARY = 128_000;

  /** Marks the start of the prompt. */
  public static final int BEGIN_OF_TEXT = VOCABULARY;

  private static final Pattern TOKEN = Pattern.compile("\\p{L}+|\\p{N}+|[^\\s\\p{L}\\p{N}]");
  /** A token with the white space before it: how a streamed answer is cut into deltas. */
  private static final Pattern PIECE = Pattern.compile("\\s*(?:" + TOKEN.pattern() + ")");

  /** One chat message. */
  public record Message(String role, String content) {}

  /** The tokens of {@code text}. */
  public int[] encode(String text) {
    List<Integer> ids = new ArrayList<>();
    appendTokens(text, ids);
    return ids.stream().mapToInt(Integer::intValue).toArray();
  }

  /** The prompt of a chat request: begin marker, then role marker and content per message, then an assistant marker. */
  public int[] encodeChat(List<Message> messages) {
    List<Integer> ids = new ArrayList<>();
    ids.add(BEGIN_OF_TEXT);
    for (Message message : messages) {
      ids.add(roleMarker(message.role()));
      appendTokens(message.content(), ids);
    }
    ids.add(roleMarker("assistant"));
    return ids.stream().mapToInt(Integer::intValue).toArray();
  }

  /**
   * The text of each token of {@code text} with the white space before it, in order: the deltas of a
   * streamed answer (joined, they give back the text without trailing white space).
   */
  public List<String> pieces(String text) {
    List<String> out = new ArrayList<>();
    Matcher m = PIECE.matcher(text);
    while (m.find()) {
      out.add(m.group());
    }
    return out;
  }

  private static void appendTokens(String text, List<Integer> ids) {
    Matcher m = TOKEN.matcher(text);
    while (m.find()) {
      ids.add(Math.floorMod(fnv1a(m.group()), VOCABULARY));
    }
  }

  /** Special ids above the regular vocabulary, one per role. */
  private static int roleMarker(String role) {
    return VOCABULARY + 1 + Math.floorMod(fnv1a(role.toLowerCase(Locale.ROOT)), 255);
  }

  private static int fnv1a(String text) {
    int hash = 0x811c9dc5;
    for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
      hash ^= b & 0xff;
      hash *= 0x01000193;
    }
    return hash;
  }
}
