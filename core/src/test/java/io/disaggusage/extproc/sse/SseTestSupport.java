package io.disaggusage.extproc.sse;

import static io.disaggusage.extproc.testing.Text.utf8;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** Shared helpers for the SSE framer tests: a stream corpus, an independent reference framer, item descriptions. */
final class SseTestSupport {

  private SseTestSupport() {}

  /** Bytes as a Latin-1 string: one char per byte, so byte-exact comparisons print readably. */
  static String latin1(byte[] b) {
    return new String(b, StandardCharsets.ISO_8859_1);
  }

  /** A named test stream. */
  record Stream(String name, byte[] bytes) {
    @Override
    public String toString() {
      return name + " (" + bytes.length + " bytes)";
    }
  }

  private static Stream s(String name, String text) {
    return new Stream(name, utf8(text));
  }

  private static final String CHAT_ID = "\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\"";

  /** Realistic and edge-case streams; every one is framed identically for every chunking. */
  static List<Stream> corpus() {
    List<Stream> c = new ArrayList<>();
    String chat = "data: {" + CHAT_ID + ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
        + "data: {" + CHAT_ID + ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
        + "data: {" + CHAT_ID + ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n"
        + "data: {" + CHAT_ID + ",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":42,"
        + "\"total_tokens\":1242,\"prompt_tokens_details\":{\"cached_tokens\":1200}}}\n\n"
        + "data: [DONE]\n\n";
    c.add(s("openai-chat-usage-done", chat));
    c.add(s("openai-chat-crlf", chat.replace("\n", "\r\n")));
    c.add(s("openai-chat-cr-only", chat.replace("\n", "\r")));
    c.add(s("trtllm-space-before-blank",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]} \n\n"
            + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
            + "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":5,"
            + "\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}}\n\n"
            + "data: [DONE]\n\n"));
    c.add(s("trtllm-perf-metrics",
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"index\":0}]}\n\n"
            + "event: trtllm.perf_metrics\ndata: {\"ctx_server\":\"a\",\"gen_server\":\"b\",\"timing\":[1,2]}\n\n"
            + "data: [DONE]\n\n"));
    c.add(s("responses-api-named-events",
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n"
            + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
            + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"!\"}\n\n"
            + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\","
            + "\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,"
            + "\"input_tokens_details\":{\"cached_tokens\":98}}}}\n\n"));
    c.add(s("g7-trtllm-streaming",
        "data: {\"choices\":[{\"delta\":{\"content\":\"hello\"},\"index\":0}],\"model\":\"test-model\"}\n\n"
            + "data: {\"choices\":[],\"model\":\"test-model\",\"usage\":{\"prompt_tokens\":128,\"completion_tokens\":5,"
            + "\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}}\n\n"
            + "data: [DONE]\n\n"));
    c.add(s("g11-llmd-no-final-blank",
        "data: {\"usage\":{\"prompt_tokens\":64,\"prompt_tokens_details\":{\"cached_tokens\":49}}}\n\ndata: [DONE]\n"));
    c.add(s("mixed-line-endings",
        "data: a\r\ndata: b\n\r\n" + "data: c\r\rdata: d\r\n\n" + "event: e\rdata: f\r\n\r" + "data: g\n\r"
            + "\r\n" + "data: [DONE]\r\n\r\n"));
    c.add(s("data-without-space", "data:{\"a\":1}\n\ndata:  two-spaces\n\ndata:[DONE]\n\n"));
    c.add(s("multi-line-data",
        "data: {\"choices\":[],\n data: ignored-leading-space\ndata: \"usage\":{\"completion_tokens\":5}}\n\n"
            + "data\ndata:\ndata: x\n\n" + "data: first\r\ndata: second\rdata: third\n\n"));
    c.add(s("comments-id-retry-unknown",
        ": keep-alive\n\n" + "id: 7\nretry: 1000\ndata: x\nfoo: bar\n:comment inside\n\n"
            + "id\nevent\ndata\n\n" + "datax: not data\ndata: real\n\n" + ":\n\n"));
    c.add(new Stream("bom-first-line",
        concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}, utf8("data: {\"a\":1}\n\ndata: [DONE]\n\n"))));
    c.add(new Stream("bom-then-blank-line",
        concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}, utf8("\r\nevent: ping\ndata: 1\n\n"))));
    c.add(new Stream("bom-only-no-terminator", new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}));
    c.add(new Stream("partial-bom-is-content",
        concat(new byte[] {(byte) 0xEF, (byte) 0xBB}, utf8("data: x\n\n"))));
    c.add(s("extra-blank-lines", "\n\ndata: a\n\n\n\r\n\rdata: b\n\n\n"));
    c.add(s("no-trailing-newline", "data: a\n\ndata: {\"usage\":{\"completion_tokens\":3}}"));
    c.add(s("single-trailing-newline", "data: a\n\ndata: {\"usage\":{\"completion_tokens\":3}}\n"));
    c.add(s("trailing-cr-only", "data: a\r\rdata: b\r"));
    c.add(s("trailing-blank-cr", "data: a\r\rdata: b\r\r"));
    c.add(s("trailing-crlf-blank", "data: a\r\n\r\n"));
    c.add(s("utf8-multibyte", "data: {\"content\":\"h\u00e9llo \u20ac \ud83d\ude00\"}\n\nevent: \u00e9v\ndata: \u4e2d\u6587\n\n"));
    c.add(s("done-only-crlf", "data: [DONE]\r\n\r\n"));
    c.add(s("empty-stream", ""));
    c.add(s("only-blank-lines", "\n\r\n\r\r\n"));
    c.add(s("comment-only-event-at-eof", ": ping"));
    return c;
  }

  static byte[] concat(byte[] a, byte[] b) {
    byte[] r = new byte[a.length + b.length];
    System.arraycopy(a, 0, r, 0, a.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  /** A comparable description of one item. Oversize pieces are described by kind, bytes and start flag. */
  record Desc(String kind, String raw, boolean terminated, String type, String payload, int dataLines,
              boolean startsOversize) {
    @Override
    public String toString() {
      return kind + (startsOversize ? "(start)" : "") + (terminated ? "" : "(unterminated)")
          + " raw=" + SseEvent.escape(raw.getBytes(StandardCharsets.ISO_8859_1), 0, raw.length(), 200)
          + (type == null ? "" : " type=" + type)
          + (kind.equals("EVENT") ? " data#" + dataLines + "=" + SseEvent.escape(
              payload.getBytes(StandardCharsets.ISO_8859_1), 0, payload.length(), 200) : "");
    }
  }

  static Desc describe(SseItem item) {
    if (item instanceof SseEvent e) {
      return new Desc("EVENT", latin1(e.rawBytes()), e.terminated(), e.eventType(), latin1(e.payloadBytes()),
          e.dataLineCount(), false);
    }
    SsePassThrough p = (SsePassThrough) item;
    return new Desc(p.kind().name(), latin1(p.rawBytes()), true, null, null, 0, p.startsOversizeEvent());
  }

  static List<Desc> describe(List<SseItem> items) {
    List<Desc> r = new ArrayList<>(items.size());
    for (SseItem i : items) {
      r.add(describe(i));
    }
    return r;
  }

  /** Merges each oversize event's pieces into one description, so that sequences are chunking-independent. */
  static List<Desc> normalize(List<Desc> items) {
    List<Desc> r = new ArrayList<>(items.size());
    for (Desc d : items) {
      if (d.kind().equals("OVERSIZE") && !d.startsOversize()) {
        Desc prev = r.isEmpty() ? null : r.get(r.size() - 1);
        if (prev == null || !prev.kind().equals("OVERSIZE")) {
          throw new AssertionError("oversize continuation without a start: " + items);
        }
        r.set(r.size() - 1, new Desc("OVERSIZE", prev.raw() + d.raw(), true, null, null, 0, true));
      } else {
        r.add(d);
      }
    }
    return r;
  }

  static byte[] concatRaw(List<SseItem> items) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (SseItem i : items) {
      out.writeBytes(i.rawArray());
    }
    return out.toByteArray();
  }

  /** Result of feeding a stream in chunks. */
  record Framed(List<SseItem> items, int maxHeld, long oversizeCount) {}

  /** Feeds {@code stream} cut at the given ascending cut points (duplicates give empty chunks), then finishes. */
  static Framed frameAt(byte[] stream, int maxEventBytes, int... cuts) {
    List<SseItem> items = new ArrayList<>();
    SseFramer f = new SseFramer(maxEventBytes, items::add);
    int prev = 0;
    int maxHeld = 0;
    for (int cut : cuts) {
      f.feed(stream, prev, cut - prev);
      maxHeld = Math.max(maxHeld, f.heldBytes());
      prev = cut;
    }
    f.feed(stream, prev, stream.length - prev);
    maxHeld = Math.max(maxHeld, f.heldBytes());
    f.finish();
    return new Framed(items, maxHeld, f.oversizeEventCount());
  }

  /** Random ascending cut points biased towards tiny and empty chunks. */
  static int[] randomCuts(Random rnd, int length) {
    List<Integer> cuts = new ArrayList<>();
    int pos = 0;
    int style = rnd.nextInt(4);
    while (pos < length) {
      int step = switch (style) {
        case 0 -> rnd.nextInt(3); // 0, 1 or 2 bytes: many empty and 1-byte chunks
        case 1 -> 1 + rnd.nextInt(8);
        case 2 -> rnd.nextInt(Math.max(1, length / 3) + 1);
        default -> rnd.nextBoolean() ? 0 : 1 + rnd.nextInt(40);
      };
      pos = Math.min(length, pos + step);
      cuts.add(pos);
    }
    return cuts.stream().mapToInt(Integer::intValue).toArray();
  }

  /** Feeds {@code stream} through {@link SseFramer#feed(ByteBuffer)} with direct buffers at the given cuts. */
  static List<SseItem> frameDirect(byte[] stream, int maxEventBytes, int[] cuts) {
    List<SseItem> items = new ArrayList<>();
    SseFramer f = new SseFramer(maxEventBytes, items::add);
    int prev = 0;
    for (int i = 0; i <= cuts.length; i++) {
      int cut = i < cuts.length ? cuts[i] : stream.length;
      ByteBuffer b = ByteBuffer.allocateDirect(cut - prev);
      b.put(stream, prev, cut - prev).flip();
      f.feed(b);
      if (b.hasRemaining()) {
        throw new AssertionError("buffer not consumed");
      }
      prev = cut;
    }
    f.finish();
    return items;
  }

  /**
   * Independent reference: frames a complete stream the simple way (split into lines, group at blank
   * lines, parse fields with String operations) and returns descriptions, oversize events as one piece.
   */
  static List<Desc> reference(byte[] b, int maxEventBytes) {
    List<Desc> out = new ArrayList<>();
    int bom = b.length >= 3 && (b[0] & 0xff) == 0xEF && (b[1] & 0xff) == 0xBB && (b[2] & 0xff) == 0xBF ? 3 : 0;
    int itemStart = 0;
    List<String> lines = new ArrayList<>();
    int pos = 0;
    while (pos < b.length) {
      int k = pos;
      while (k < b.length && b[k] != '\n' && b[k] != '\r') {
        k++;
      }
      if (k == b.length) {
        break;
      }
      int term = b[k] == '\r' && k + 1 < b.length && b[k + 1] == '\n' ? 2 : 1;
      int cs = Math.max(pos, bom);
      if (cs == k) {
        out.add(referenceItem(b, itemStart, k + term, lines, true, maxEventBytes));
        itemStart = k + term;
        lines = new ArrayList<>();
      } else {
        lines.add(new String(b, cs, k - cs, StandardCharsets.ISO_8859_1));
      }
      pos = k + term;
    }
    if (itemStart < b.length) {
      int cs = Math.max(pos, bom);
      if (cs < b.length) {
        lines.add(new String(b, cs, b.length - cs, StandardCharsets.ISO_8859_1));
      }
      out.add(referenceItem(b, itemStart, b.length, lines, false, maxEventBytes));
    }
    return out;
  }

  private static Desc referenceItem(byte[] b, int from, int to, List<String> lines, boolean terminated, int max) {
    String raw = new String(b, from, to - from, StandardCharsets.ISO_8859_1);
    if (to - from > max) {
      return new Desc("OVERSIZE", raw, true, null, null, 0, true);
    }
    if (lines.isEmpty()) {
      return new Desc("INTER_EVENT", raw, true, null, null, 0, false);
    }
    String type = null;
    List<String> data = new ArrayList<>();
    for (String line : lines) {
      if (line.startsWith(":")) {
        continue;
      }
      int colon = line.indexOf(':');
      String name = colon < 0 ? line : line.substring(0, colon);
      String value = colon < 0 ? "" : line.substring(colon + 1);
      if (value.startsWith(" ")) {
        value = value.substring(1);
      }
      if (name.equals("data")) {
        data.add(value);
      } else if (name.equals("event")) {
        type = new String(value.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
      }
    }
    return new Desc("EVENT", raw, terminated, type, String.join("\n", data), data.size(), false);
  }

  /** Random SSE-like stream built from tokens that stress line endings, fields and the BOM. */
  static byte[] randomStream(Random rnd) {
    String[] tokens = {
      "data: ", "data:", "data", "event: ", "event:x", "id: 1", "retry: 5", ": c", ":", "x", "{\"usage\":1}",
      "[DONE]", " ", "\n", "\n", "\r", "\r\n", "\r\n", "\n\n", "\r\r", "\u00e9", "datax:", "abcdefghij"
    };
    StringBuilder sb = new StringBuilder();
    if (rnd.nextInt(5) == 0) {
      sb.append('\uFEFF');
    }
    int n = rnd.nextInt(40);
    for (int i = 0; i < n; i++) {
      sb.append(tokens[rnd.nextInt(tokens.length)]);
    }
    return utf8(sb.toString());
  }
}
