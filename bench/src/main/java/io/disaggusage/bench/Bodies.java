package io.disaggusage.bench;

import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Worker bodies of realistic shape for the benchmarks, built on the scenario suite's {@link Wire}
 * (the event and document layouts TensorRT-LLM, vLLM and SGLang put on the wire).
 */
public final class Bodies {
  /** The generation worker's usage: the whole prompt reported as cached (the bug being corrected). */
  public static final String GENERATION_USAGE = Wire.usage(1013, 300, 1013L);
  /** The context worker's usage. */
  public static final String CONTEXT_USAGE = Wire.usage(1013, 1, 7L);

  private static final String[] WORDS = {
    "The", " capital", " of", " France", " is", " Paris", ",", " a", " city", " known", " for", " its",
    " museums", ".", "\\n", " It", " has", " about", " two", " million", " inhabitants", " and", " the",
    " Seine", " flows", " through", " it", "\\\"", " café", " 🙂"
  };

  private Bodies() {}

  /** A chat completion stream: {@code events} content events, the usage event, {@code [DONE]}. */
  public static byte[] chatStream(int events, long seed) {
    return utf8(contentEvents(events, seed) + Wire.usageChunk(GENERATION_USAGE) + Wire.DONE);
  }

  /** Content events only: no usage anywhere (what pass-through framing sees). */
  public static byte[] contentOnly(int events, long seed) {
    return utf8(contentEvents(events, seed));
  }

  /**
   * A vLLM {@code continuous_usage_stats} stream: every event carries a usage object, then
   * {@code [DONE]}.
   */
  public static byte[] continuousUsageStream(int events, long seed) {
    Random rnd = new Random(seed);
    StringBuilder sb = new StringBuilder(events * 320);
    for (int i = 0; i < events; i++) {
      sb.append("data: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"")
          .append(Wire.MODEL)
          .append("\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"")
          .append(WORDS[rnd.nextInt(WORDS.length)])
          .append("\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":")
          .append(Wire.usage(1013, i + 1, 1013L))
          .append("}\n\n");
    }
    return utf8(sb.append(Wire.DONE).toString());
  }

  /** The single final usage event of a chat stream. */
  public static byte[] usageEvent() {
    return utf8(Wire.usageChunk(GENERATION_USAGE));
  }

  /**
   * A non-streaming chat completion of about {@code targetBytes} bytes: the message content, then
   * per-token {@code logprobs} with five {@code top_logprobs} each (what makes such bodies large),
   * and the usage object at the end, as engines write it.
   */
  public static byte[] chatCompletionWithLogprobs(int targetBytes, long seed) {
    Random rnd = new Random(seed);
    StringBuilder content = new StringBuilder();
    StringBuilder logprobs = new StringBuilder(targetBytes + 1024);
    String head = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1764400000,\"model\":\""
        + Wire.MODEL + "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"";
    String tail = "]},\"finish_reason\":\"stop\"}],\"usage\":" + GENERATION_USAGE + "}";
    int budget = targetBytes - head.length() - tail.length() - 64;
    boolean first = true;
    while (content.length() + logprobs.length() < budget || first) {
      String token = WORDS[rnd.nextInt(WORDS.length)];
      content.append(token);
      if (!first) {
        logprobs.append(',');
      }
      first = false;
      logprobs.append("{\"token\":\"").append(token).append("\",\"logprob\":").append(logprob(rnd))
          .append(",\"bytes\":").append(bytesOf(token)).append(",\"top_logprobs\":[");
      for (int k = 0; k < 5; k++) {
        String alt = WORDS[rnd.nextInt(WORDS.length)];
        logprobs.append(k == 0 ? "" : ",").append("{\"token\":\"").append(alt).append("\",\"logprob\":")
            .append(logprob(rnd)).append(",\"bytes\":").append(bytesOf(alt)).append('}');
      }
      logprobs.append("]}");
    }
    return utf8(head + content + "\"},\"logprobs\":{\"content\":[" + logprobs + tail);
  }

  /** Cuts {@code body} into chunks of uniformly random size in {@code [min, max]} bytes. */
  public static List<byte[]> chunks(byte[] body, int min, int max, long seed) {
    Random rnd = new Random(seed);
    List<byte[]> out = new ArrayList<>();
    int i = 0;
    while (i < body.length) {
      int n = min + rnd.nextInt(max - min + 1);
      out.add(Arrays.copyOfRange(body, i, Math.min(body.length, i + n)));
      i += n;
    }
    return out;
  }

  /** Cuts {@code body} into chunks of {@code size} bytes. */
  public static List<byte[]> chunks(byte[] body, int size) {
    return chunks(body, size, size, 0);
  }

  /** The content events of {@link #contentOnly}, one string each: what a streaming worker writes one at a time. */
  public static List<String> contentEventList(int events, long seed) {
    Random rnd = new Random(seed);
    List<String> out = new ArrayList<>(events);
    for (int i = 0; i < events; i++) {
      out.add(Wire.chunk(WORDS[rnd.nextInt(WORDS.length)]));
    }
    return out;
  }

  private static String contentEvents(int events, long seed) {
    return String.join("", contentEventList(events, seed));
  }

  private static String logprob(Random rnd) {
    return String.format(java.util.Locale.ROOT, "%.8f", -rnd.nextDouble() * 12);
  }

  private static String bytesOf(String token) {
    String unescaped = token.replace("\\n", "\n").replace("\\\"", "\"");
    byte[] b = unescaped.getBytes(StandardCharsets.UTF_8);
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < b.length; i++) {
      sb.append(i == 0 ? "" : ",").append(b[i] & 0xFF);
    }
    return sb.append(']').toString();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
