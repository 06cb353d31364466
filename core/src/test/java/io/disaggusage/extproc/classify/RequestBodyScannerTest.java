package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.usage.UsageDocument;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The request-body scanner gives the same facts for every chunking of a body. */
class RequestBodyScannerTest {
  static final String TRT_GEN =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"disaggregated_params\\\"\"}],"
          + "\"stream\":true,\"disaggregated_params\":{\"request_type\":\"generation_only\","
          + "\"first_gen_tokens\":[7],\"ctx_request_id\":9223372036854775807,"
          + "\"disagg_request_id\":2748779069441234567,\"schedule_style\":1,"
          + "\"ctx_usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,\"total_tokens\":11,"
          + "\"prompt_tokens_details\":{\"cached_tokens\":4,\"audio_tokens\":null}},"
          + "\"encoded_opaque_state\":\"abc\"}}";

  static final String VLLM_PREFILL =
      "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null},\"max_tokens\":1}";
  /** A decode request as the toy proxy sends it: the prefill response's params, verbatim. */
  static final String VLLM_DECODE =
      "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
          + "\"remote_block_ids\":[[1,2]],\"remote_engine_id\":\"e-1\",\"remote_request_id\":\"chatcmpl-x-0a1b2c3d\","
          + "\"remote_prefill_cached_tokens\":0,\"transfer_id\":\"mc-7\"}}";
  static final String SGLANG_ROOM =
      "{\"bootstrap_host\":\"10.0.0.1\",\"bootstrap_port\":null,\"bootstrap_room\":9007199254740993}";
  static final String SGLANG_BATCH = "{\"bootstrap_room\":[1,2],\"bootstrap_host\":[\"a\",\"b\"]}";
  static final String NESTED_LOOKALIKES =
      "{\"messages\":[{\"disaggregated_params\":{\"request_type\":\"context_only\"}}],"
          + "\"extra\":{\"kv_transfer_params\":{\"do_remote_decode\":true}}}";
  static final String OVERSIZE_CTX_USAGE =
      "{\"disaggregated_params\":{\"ctx_usage\":{\"prompt_tokens\":1,\"pad\":\""
          + "x".repeat(200)
          + "\",\"n\":{\"a\":[1,2]}},\"request_type\":\"generation_only\",\"ctx_request_id\":5},\"model\":\"after\"}";
  static final String COMMA_IN_STRING = "{\"model\":\"a,  b\",\"stream\":true}";

  /** The well-formed bodies these tests use (the MessagePack reader must give the same facts for them). */
  static List<String> wellFormedBodies() {
    return List.of(TRT_GEN, VLLM_PREFILL, VLLM_DECODE, SGLANG_ROOM, SGLANG_BATCH, NESTED_LOOKALIKES, OVERSIZE_CTX_USAGE, COMMA_IN_STRING);
  }

  static RequestFacts scan(String body, int[] splits) {
    RequestBodyScanner s = new RequestBodyScanner(UsageDocument.newFactory(1 << 20), 64 * 1024);
    return ChunkedReads.read(s, body.getBytes(StandardCharsets.UTF_8), ChunkedReads.ARRAY_WINDOWS, splits);
  }

  @Test
  void trtGenerationRequestFactsAreExact() {
    RequestFacts f = scan(TRT_GEN, new int[0]);
    assertThat(f.malformed()).isFalse();
    assertThat(f.model()).isEqualTo("m");
    assertThat(f.stream()).isTrue();
    assertThat(f.trtRequestType()).isEqualTo("generation_only");
    assertThat(f.trtCtxRequestId()).isEqualTo("9223372036854775807");
    assertThat(f.trtDisaggRequestId()).isEqualTo("2748779069441234567");
    assertThat(f.trtScheduleStyle()).isEqualTo("1");
    assertThat(f.trtCtxUsage()).isNotNull();
    assertThat(f.trtCtxUsage().promptTokens()).isEqualTo(BigInteger.TEN);
    assertThat(f.trtCtxUsage().cachedTokens()).isEqualTo(BigInteger.valueOf(4));
    assertThat(f.trtCtxUsage().details()).containsEntry("audio_tokens", "null");
  }

  @Test
  void everySplitPointGivesTheSameFacts() {
    RequestFacts whole = scan(TRT_GEN, new int[0]);
    int len = TRT_GEN.getBytes(StandardCharsets.UTF_8).length;
    for (int i = 0; i <= len; i++) {
      assertThat(scan(TRT_GEN, new int[] {i})).as("split at %d", i).isEqualTo(whole);
    }
    long seed = System.nanoTime();
    Random random = new Random(seed);
    for (int n = 0; n < 300; n++) {
      int[] splits = random.ints(random.nextInt(8), 0, len + 1).sorted().toArray();
      assertThat(scan(TRT_GEN, splits)).as("seed %d run %d", seed, n).isEqualTo(whole);
    }
  }

  @Test
  void vllmMarkersAndSglangRoom() {
    RequestFacts p = scan(VLLM_PREFILL, new int[] {5});
    assertThat(p.remoteDecode()).isTrue();
    assertThat(p.remotePrefill()).isFalse();
    assertThat(p.kvRemoteRequestId()).isNull();
    assertThat(p.kvTransferId()).isNull();
    RequestFacts d = scan(VLLM_DECODE, new int[] {40});
    assertThat(d.remotePrefill()).isTrue();
    assertThat(d.kvRemoteRequestId()).isEqualTo("chatcmpl-x-0a1b2c3d");
    assertThat(d.kvTransferId()).isEqualTo("mc-7");
    assertThat(scan("{\"kv_transfer_params\":{\"remote_request_id\":7,\"transfer_id\":7}}", new int[0]))
        .extracting(RequestFacts::kvRemoteRequestId, RequestFacts::kvTransferId)
        .containsExactly(null, "7");
    RequestFacts s = scan(SGLANG_ROOM, new int[0]);
    assertThat(s.bootstrapRoom()).isEqualTo("9007199254740993");
    assertThat(s.bootstrapHost()).isEqualTo("10.0.0.1");
    assertThat(s.bootstrapBatched()).isFalse();
    RequestFacts batch = scan(SGLANG_BATCH, new int[0]);
    assertThat(batch.bootstrapBatched()).isTrue();
    assertThat(batch.bootstrapRoom()).startsWith("batch2:").hasSize("batch2:".length() + 64);
    assertThat(batch.bootstrapHost()).startsWith("batch2:");
  }

  @Test
  void sglangBatchKeysTellEveryArrayApartAndNeedIdsOnly() {
    java.util.function.Function<String, String> room =
        rooms -> scan("{\"bootstrap_host\":\"h\",\"bootstrap_room\":" + rooms + "}", new int[0]).bootstrapRoom();
    String key = room.apply("[9223372036854775806,1]");
    assertThat(room.apply("[9223372036854775806,1]")).isEqualTo(key);
    assertThat(room.apply("[1,9223372036854775806]")).isNotEqualTo(key); // order matters
    assertThat(room.apply("[9223372036854775806]")).isNotEqualTo(key);
    assertThat(room.apply("[12,3]")).isNotEqualTo(room.apply("[1,23]")); // element boundaries count
    // Exact int64 text, never a double: these two differ only beyond 2^53.
    assertThat(room.apply("[9007199254740993]")).isNotEqualTo(room.apply("[9007199254740992]"));
    assertThat(room.apply("[]")).isNull();
    assertThat(room.apply("[1,null]")).isNull();
    assertThat(room.apply("[1,1.5]")).isNull();
    assertThat(room.apply("[1,[2]]")).isNull();
    assertThat(room.apply("[1,{\"a\":2}]")).isNull();
    // The last member wins, scalar or array.
    assertThat(scan("{\"bootstrap_room\":[1,2],\"bootstrap_room\":7}", new int[0]).bootstrapRoom()).isEqualTo("7");
    assertThat(scan("{\"bootstrap_room\":7,\"bootstrap_room\":[1,2]}", new int[0]).bootstrapRoom()).isEqualTo(room.apply("[1,2]"));
    // Arrays elsewhere do not leak into the key.
    assertThat(scan("{\"bootstrap_room\":[1,2],\"messages\":[3]}", new int[0]).bootstrapRoom()).isEqualTo(room.apply("[1,2]"));
    // Whatever the chunking.
    String body = "{\"bootstrap_host\":[\"10.0.0.1\",\"10.0.0.2\"],\"bootstrap_room\":[9223372036854775806,42]}";
    RequestFacts whole = scan(body, new int[0]);
    for (int i = 0; i <= body.length(); i++) {
      assertThat(scan(body, new int[] {i})).as("split at %d", i).isEqualTo(whole);
    }
  }

  @Test
  void nestedLookalikesAreIgnored() {
    RequestFacts f = scan(NESTED_LOOKALIKES, new int[0]);
    assertThat(f.trtRequestType()).isNull();
    assertThat(f.remoteDecode()).isFalse();
  }

  @Test
  void oversizeCtxUsageIsDroppedButScanningContinues() {
    RequestBodyScanner s = new RequestBodyScanner(UsageDocument.newFactory(1 << 20), 64);
    s.feed(ByteBuffer.wrap(OVERSIZE_CTX_USAGE.getBytes(StandardCharsets.UTF_8)));
    s.end();
    RequestFacts f = s.facts();
    assertThat(f.trtCtxUsage()).isNull();
    assertThat(f.trtRequestType()).isEqualTo("generation_only");
    assertThat(f.trtCtxRequestId()).isEqualTo("5");
    assertThat(f.model()).isEqualTo("after");
    assertThat(f.malformed()).isFalse();
  }

  @ParameterizedTest
  @ValueSource(strings = {"[1,2]", "{\"a\":", "{\"a\":1}}", "nope", "{\"a\":1} {\"b\":2}"})
  void malformedBodies(String body) {
    assertThat(scan(body, new int[0]).malformed()).isTrue();
  }

  /**
   * Found by RequestBodyScannerFuzzTest: Jackson's non-blocking parser accepts a trailing comma in an
   * object when a chunk ends right after it, so the same body was malformed or not depending on where
   * Envoy cut it. Every split must give the facts of the whole body.
   */
  @Test
  void trailingCommaIsMalformedWhereverTheBodyIsCut() {
    for (String body :
        new String[] {
          "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_decode\":true},}",
          "{\"model\":\"m\", \n\t}",
          "{\"kv_transfer_params\":{\"do_remote_decode\":true,  }}",
          COMMA_IN_STRING
        }) {
      RequestFacts whole = scan(body, new int[0]);
      for (int k = 1; k < body.length(); k++) {
        assertThat(scan(body, new int[] {k})).as("%s split at %d", body, k).isEqualTo(whole);
        for (int j = k + 1; j < body.length(); j++) {
          assertThat(scan(body, new int[] {k, j})).as("%s split at %d,%d", body, k, j).isEqualTo(whole);
        }
      }
    }
    assertThat(scan("{\"model\":\"m\",}", new int[] {12}).malformed()).isTrue();
    assertThat(scan("{\"model\":\"a,  b\"}", new int[] {6, 8}).model()).isEqualTo("a,  b");
  }
}
