package io.disaggusage.extproc.classify;

import static io.disaggusage.extproc.classify.MsgpackRequestScannerTest.CAP;
import static io.disaggusage.extproc.classify.MsgpackRequestScannerTest.JSON;
import static io.disaggusage.extproc.classify.MsgpackRequestScannerTest.json;
import static io.disaggusage.extproc.classify.MsgpackRequestScannerTest.msgpack;
import static io.disaggusage.extproc.testing.Text.utf8;
import static io.disaggusage.extproc.testkit.MsgpackBodies.indexOf;
import static io.disaggusage.extproc.testkit.MsgpackBodies.pack;
import static io.disaggusage.extproc.testkit.MsgpackBodies.raw;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Packing;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.msgpack.core.MessageBufferPacker;

/**
 * Every MessagePack format through the request reader: skipped where it is no fact (ext, bin, str8/16/32,
 * map16/32, array16/32, fixint and negative ints, float32/64, nil, bool), read exactly where it is one
 * (int64 ids in their uint64 and int64 spellings), the bodies that are malformed, and memory that does
 * not grow with the body.
 */
class MsgpackRequestFormatsTest {
  static final String TRT_ID = "2748779069441234567";

  /** One value of every format, with payloads long enough to need their wide headers. */
  static void everyFormat(MessageBufferPacker p) throws IOException {
    p.packArrayHeader(35);
    p.packInt(5); // positive fixint
    p.packInt(-3); // negative fixint
    raw(p, 0xcc, 200, 1);
    raw(p, 0xcd, 60000, 2);
    raw(p, 0xce, 4_000_000_000L, 4);
    raw(p, 0xcf, -1L, 8); // uint64 max
    raw(p, 0xd0, -100, 1);
    raw(p, 0xd1, -30000, 2);
    raw(p, 0xd2, -2_000_000_000L, 4);
    raw(p, 0xd3, Long.MIN_VALUE, 8);
    p.packFloat(0.5f);
    p.packDouble(1e300);
    p.packNil();
    p.packBoolean(true);
    p.packBoolean(false);
    p.packString("fixstr");
    p.packString("s".repeat(200)); // str8
    p.packString("t".repeat(300)); // str16
    p.packString("u".repeat(70_000)); // str32
    p.packBinaryHeader(3).writePayload(new byte[] {(byte) 0xc1, (byte) 0x81, (byte) 0xdf}); // bin8, format bytes inside
    p.packBinaryHeader(300).writePayload(new byte[300]); // bin16
    p.packBinaryHeader(70_000).writePayload(new byte[70_000]); // bin32
    for (int n : new int[] {1, 2, 4, 8, 16}) {
      p.packExtensionTypeHeader((byte) 7, n).writePayload(filled(n, 0x91)); // fixext1..16
    }
    p.packExtensionTypeHeader((byte) -1, 12).writePayload(new byte[12]); // ext8 (timestamp type)
    p.packExtensionTypeHeader((byte) 9, 300).writePayload(filled(300, 0xa5)); // ext16
    p.packExtensionTypeHeader((byte) 9, 70_000).writePayload(filled(70_000, 0xdd)); // ext32
    raw(p, 0xde, 1, 2); // map16
    p.packString("k").packInt(1);
    raw(p, 0xdf, 1, 4); // map32 holding an array32 of two elements
    p.packString("arr");
    raw(p, 0xdd, 2, 4);
    p.packInt(1).packString("disaggregated_params");
    raw(p, 0xdc, 0, 2); // empty array16
    p.packMapHeader(0); // empty fixmap
    p.packArrayHeader(2).packString("request_type").packString("context_only"); // a look-alike, nested
  }

  static byte[] filled(int n, int b) {
    byte[] bytes = new byte[n];
    Arrays.fill(bytes, (byte) b);
    return bytes;
  }

  static void trtFacts(MessageBufferPacker p, Packing idSpelling) throws IOException {
    p.packString("disaggregated_params").packMapHeader(5);
    p.packString("x").packInt(0); // replaced below by the caller's skipped values where needed
    p.packString("request_type").packString("generation_only");
    p.packString("ctx_request_id");
    idSpelling.write(p);
    p.packString("schedule_style").packInt(1);
    p.packString("ctx_usage").packMapHeader(2);
    p.packString("prompt_tokens").packInt(10);
    p.packString("prompt_tokens_details").packMapHeader(2).packString("cached_tokens").packInt(4);
    p.packString("cached_rate").packFloat(0.5f);
  }

  @Test
  void everyFormatIsSkippedWhereItIsNoFact() {
    byte[] body =
        pack(
            p -> {
              p.packMapHeader(5);
              p.packString("skip");
              everyFormat(p);
              p.packString("model").packString("m");
              trtFacts(p, q -> raw(q, 0xcf, Long.parseLong(TRT_ID), 8));
              p.packString("stream").packBoolean(true);
              p.packString("after");
              everyFormat(p);
            });
    RequestFacts expected =
        json(
            utf8(
                "{\"model\":\"m\",\"disaggregated_params\":{\"x\":0,\"request_type\":\"generation_only\",\"ctx_request_id\":"
                    + TRT_ID
                    + ",\"schedule_style\":1,\"ctx_usage\":{\"prompt_tokens\":10,\"prompt_tokens_details\":"
                    + "{\"cached_tokens\":4,\"cached_rate\":0.5}}},\"stream\":true}"),
            CAP);
    assertThat(expected.malformed()).isFalse();
    assertThat(expected.trtCtxUsage().details()).containsEntry("cached_rate", "0.5");
    assertThat(msgpack(body, CAP)).isEqualTo(expected);
    for (int k = 0; k <= body.length; k += k < 2000 ? 1 : 97) {
      assertThat(msgpack(body, CAP, k)).as("split at %d", k).isEqualTo(expected);
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"uint64", "int64", "uint32", "int32", "str"})
  void int64IdsAreExactInEverySpelling(String spelling) {
    Packing id =
        switch (spelling) {
          case "uint64" -> p -> raw(p, 0xcf, Long.parseLong(TRT_ID), 8);
          case "int64" -> p -> raw(p, 0xd3, Long.parseLong(TRT_ID), 8);
          case "uint32" -> p -> raw(p, 0xce, Long.parseLong(TRT_ID), 4);
          case "int32" -> p -> raw(p, 0xd2, Long.parseLong(TRT_ID), 4);
          default -> p -> p.packString(TRT_ID);
        };
    String expected =
        switch (spelling) {
          case "uint32" -> Long.toString(Long.parseLong(TRT_ID) & 0xffffffffL);
          case "int32" -> Integer.toString((int) Long.parseLong(TRT_ID));
          default -> TRT_ID;
        };
    byte[] body = pack(p -> {
      p.packMapHeader(1);
      trtFacts(p, id);
    });
    RequestFacts f = msgpack(body, CAP);
    assertThat(f.malformed()).isFalse();
    assertThat(f.trtCtxRequestId()).isEqualTo(expected);
    assertThat(f.trtScheduleStyle()).isEqualTo("1");
  }

  @Test
  void idsAtTheEdgesOfTheIntegerRange() {
    BigInteger uint64Max = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
    for (String id : new String[] {uint64Max.toString(), Long.toString(Long.MIN_VALUE), "9223372036854775808", "0", "-1"}) {
      String doc = "{\"disaggregated_params\":{\"disagg_request_id\":" + id + "},\"bootstrap_room\":" + id + "}";
      for (Style style : Style.values()) {
        RequestFacts f = msgpack(MsgpackBodies.fromJson(doc, style), CAP);
        assertThat(f.trtDisaggRequestId()).as("%s %s", id, style).isEqualTo(id);
        assertThat(f.bootstrapRoom()).as("%s %s", id, style).isEqualTo(id);
        assertThat(f).isEqualTo(json(utf8(doc), CAP));
      }
    }
  }

  @Test
  void binAndExtValuesAreNeverFacts() {
    byte[] body =
        pack(
            p -> {
              p.packMapHeader(3);
              p.packString("model").packBinaryHeader(1).writePayload(new byte[] {'m'});
              p.packString("disaggregated_params").packMapHeader(3);
              p.packString("request_type").packExtensionTypeHeader((byte) 1, 1).writePayload(new byte[] {'c'});
              p.packString("disagg_request_id").packBinaryHeader(8).writePayload(new byte[8]);
              p.packString("ctx_usage").packMapHeader(1).packString("prompt_tokens").packBinaryHeader(1).writePayload(new byte[] {1});
              p.packString("stream").packBoolean(false);
            });
    RequestFacts f = msgpack(body, CAP);
    assertThat(f.malformed()).isFalse();
    assertThat(f.model()).isNull();
    assertThat(f.trtRequestType()).isNull();
    assertThat(f.trtDisaggRequestId()).isNull();
    assertThat(f.trtCtxUsage()).isNull();
    assertThat(f.stream()).isFalse();
  }

  @Test
  void aLaterCtxUsageReplacesAnEarlierOneAndAnOversizeOneIsDroppedWhileReadingGoesOn() {
    String usable = "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}";
    String big = "{\"prompt_tokens\":1,\"pad\":\"" + "x".repeat(200) + "\",\"n\":{\"a\":[1,2]}}";
    for (String doc :
        new String[] {
          "{\"disaggregated_params\":{\"ctx_usage\":" + usable + ",\"ctx_usage\":{\"prompt_tokens\":-1}},\"model\":\"a\"}",
          "{\"disaggregated_params\":{\"ctx_usage\":" + usable + ",\"ctx_usage\":" + big + ",\"ctx_request_id\":5},\"model\":\"b\"}",
          "{\"disaggregated_params\":{\"ctx_usage\":[1],\"ctx_usage\":null,\"request_type\":\"generation_only\"}}",
        }) {
      for (int cap : new int[] {CAP, 64, 1}) {
        for (Style style : Style.values()) {
          assertThat(msgpack(MsgpackBodies.fromJson(doc, style), cap)).as("%s cap %d %s", doc, cap, style)
              .isEqualTo(json(utf8(doc), cap));
        }
      }
    }
    RequestFacts f = msgpack(MsgpackBodies.fromJson(
        "{\"disaggregated_params\":{\"ctx_usage\":" + big + ",\"request_type\":\"generation_only\",\"ctx_request_id\":5},\"model\":\"after\"}",
        Style.COMPACT), 64);
    assertThat(f.trtCtxUsage()).isNull();
    assertThat(f.trtCtxRequestId()).isEqualTo("5");
    assertThat(f.model()).isEqualTo("after");
  }

  @Test
  void aFactStringIsReadUpToItsBound() {
    for (int cap : new int[] {1, 32, MsgpackRequestScanner.MIN_FACT_BYTES + 10}) {
      int bound = Math.max(cap, MsgpackRequestScanner.MIN_FACT_BYTES);
      for (int length : new int[] {bound, bound + 1}) {
        String model = "m".repeat(length);
        String doc = "{\"model\":\"" + model + "\",\"disaggregated_params\":{\"request_type\":\"context_only\"}}";
        RequestFacts f = msgpack(MsgpackBodies.fromJson(doc, Style.COMPACT), cap);
        // Above the bound it is never held, and reads as absent (Jackson would read it whole).
        assertThat(f.model()).as("cap %d length %d", cap, length).isEqualTo(length > bound ? null : model);
        assertThat(f.trtRequestType()).isEqualTo("context_only");
        assertThat(f.malformed()).isFalse();
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Malformed bodies: the same outcome as malformed JSON (facts read so far kept, malformed set)

  static final String TRT_CONTEXT =
      "{\"model\":\"m\",\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":" + TRT_ID + "}}";

  @Test
  void everyTruncationIsMalformedAndKeepsWhatWasRead() {
    byte[] body = MsgpackBodies.fromJson(TRT_CONTEXT, Style.COMPACT);
    byte[] json = utf8(TRT_CONTEXT);
    for (int k = 1; k < body.length; k++) {
      RequestFacts f = msgpack(Arrays.copyOf(body, k), CAP);
      assertThat(f.malformed()).as("cut at %d", k).isTrue();
    }
    assertThat(msgpack(new byte[0], CAP)).isEqualTo(json(new byte[0], CAP)).isEqualTo(RequestFacts.NONE);
    // Cut right after the request type, in both encodings: the phase already read stays.
    RequestFacts cutMsgpack = msgpack(Arrays.copyOf(body, indexOf(body, "context_only") + "context_only".length()), CAP);
    RequestFacts cutJson = json(Arrays.copyOf(json, indexOf(json, "context_only") + "context_only".length() + 1), CAP);
    assertThat(cutMsgpack).isEqualTo(cutJson);
    assertThat(cutMsgpack.trtRequestType()).isEqualTo("context_only");
    assertThat(cutMsgpack.malformed()).isTrue();
  }

  @Test
  void malformedShapes() {
    byte[] ok = MsgpackBodies.fromJson(TRT_CONTEXT, Style.COMPACT);
    Map<String, byte[]> bad =
        Map.of(
            "root array", pack(p -> p.packArrayHeader(1).packInt(1)),
            "root scalar", pack(p -> p.packString("x")),
            "trailing byte", concat(ok, new byte[] {(byte) 0xc0}),
            "second document", concat(ok, ok),
            "never-used 0xc1", pack(p -> p.packMapHeader(1).packString("a").writePayload(new byte[] {(byte) 0xc1})),
            "integer key", pack(p -> p.packMapHeader(1).packInt(1).packInt(2)),
            "map key", pack(p -> p.packMapHeader(1).packMapHeader(0).packInt(2)),
            "invalid UTF-8 in a fact", pack(p -> p.packMapHeader(1).packString("model").packRawStringHeader(2)
                .writePayload(new byte[] {(byte) 0xc3, 0x28})),
            "invalid UTF-8 in a top-level key", pack(p -> p.packMapHeader(1).packRawStringHeader(1)
                .writePayload(new byte[] {(byte) 0xff}).packInt(1)));
    bad.forEach((name, body) -> {
      for (int k = 0; k <= body.length; k++) {
        assertThat(msgpack(body, CAP, k).malformed()).as("%s split at %d", name, k).isTrue();
      }
    });
    // Facts before the error are kept, as for JSON.
    RequestFacts f = msgpack(concat(ok, new byte[] {1}), CAP);
    assertThat(f.trtDisaggRequestId()).isEqualTo(TRT_ID);
    assertThat(f).isEqualTo(json(utf8(TRT_CONTEXT + " 1"), CAP));
  }

  @Test
  void nestingIsLimitedAsForJson() {
    int limit = JSON.streamReadConstraints().getMaxNestingDepth();
    for (int levels : new int[] {limit, limit + 1}) {
      String doc = "{\"model\":\"m\",\"x\":" + "[".repeat(levels - 1) + "]".repeat(levels - 1) + ",\"stream\":true}";
      RequestFacts expected = json(utf8(doc), CAP);
      assertThat(expected.malformed()).isEqualTo(levels > limit);
      byte[] body = pack(p -> {
        p.packMapHeader(3).packString("model").packString("m").packString("x");
        for (int i = 0; i < levels - 2; i++) {
          p.packArrayHeader(1);
        }
        p.packArrayHeader(0);
        p.packString("stream").packBoolean(true);
      });
      assertThat(msgpack(body, CAP)).as("%d levels", levels).isEqualTo(expected);
    }
  }

  static byte[] concat(byte[] a, byte[] b) {
    byte[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Memory

  /**
   * A body with a {@code prompt_token_ids} array of millions of ids (and message strings of megabytes)
   * is read allocating a few kilobytes, the same whatever its size: nothing of it is held.
   */
  @Test
  void memoryDoesNotGrowWithTheBody() throws IOException {
    long small = allocatedWhileReading(1 << 20);
    long large = allocatedWhileReading(48 << 20);
    assertThat(small).isLessThan(64 * 1024);
    assertThat(large).isLessThan(64 * 1024);
    assertThat(Math.abs(large - small)).as("growth from 1 MiB to 48 MiB").isLessThan(8 * 1024);
  }

  /** Feeds a generated body of about {@code size} bytes through one reused chunk buffer. */
  static long allocatedWhileReading(int size) throws IOException {
    int ids = size / 5;
    int text = size / 2;
    byte[] head = pack(p -> {
      p.packMapHeader(4);
      p.packString("model").packString("m");
      p.packString("messages").packArrayHeader(1).packMapHeader(1).packString("content").packRawStringHeader(text);
    });
    byte[] middle = pack(p -> p.packString("prompt_token_ids").packArrayHeader(ids));
    byte[] tail = pack(p -> trtFacts(p, q -> raw(q, 0xcf, Long.parseLong(TRT_ID), 8)));
    var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    MsgpackRequestScanner scanner = new MsgpackRequestScanner(JSON, CAP);
    ByteBuffer chunk = ByteBuffer.allocate(16 * 1024);
    long tid = Thread.currentThread().getId();
    long before = threads.getThreadAllocatedBytes(tid);
    feed(scanner, chunk, head);
    for (int sent = 0; sent < text; ) {
      chunk.clear();
      int n = Math.min(chunk.capacity(), text - sent);
      chunk.limit(n);
      scanner.feed(chunk);
      sent += n;
    }
    feed(scanner, chunk, middle);
    for (int sent = 0; sent < ids; ) {
      chunk.clear();
      while (chunk.remaining() >= 5 && sent < ids) {
        chunk.put((byte) 0xce).putInt(128_000 + sent % 1000); // uint32 token ids, as a large vocabulary gives
        sent++;
      }
      chunk.flip();
      scanner.feed(chunk);
    }
    feed(scanner, chunk, tail);
    scanner.end();
    long allocated = threads.getThreadAllocatedBytes(tid) - before;
    RequestFacts f = scanner.facts();
    assertThat(f.malformed()).isFalse();
    assertThat(f.model()).isEqualTo("m");
    assertThat(f.trtCtxRequestId()).isEqualTo(TRT_ID);
    assertThat(f.trtCtxUsage().cachedTokens()).isEqualTo(BigInteger.valueOf(4));
    return allocated;
  }

  static void feed(MsgpackRequestScanner scanner, ByteBuffer chunk, byte[] bytes) {
    chunk.clear();
    chunk.put(bytes).flip();
    scanner.feed(chunk);
  }
}
