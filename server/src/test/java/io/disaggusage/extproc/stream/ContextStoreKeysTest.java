package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.CorrelationKey.Source;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The alias keys a context leg stores its usage under: TensorRT-LLM's ids, vLLM's KV transfer handle. */
class ContextStoreKeysTest {
  static final int MAX_KEY_BYTES = 16;

  static CorrelationKey trt(String id) {
    return new CorrelationKey(Source.TRTLLM, id);
  }

  @Test
  void aLegWithoutKeysIsStoredUnderTheIdsItsResponseNames() {
    ContextStoreKeys keys = new ContextStoreKeys(List.of(), MAX_KEY_BYTES);
    assertThat(keys.with(List.of("7", "8"), null)).containsExactly(trt("7"), trt("8"));
    assertThat(keys.with(List.of(), null)).isEmpty();
  }

  @Test
  void trtKeysGainTheResponseIdsAfterThemOnce() {
    ContextStoreKeys keys = new ContextStoreKeys(List.of(trt("1")), MAX_KEY_BYTES);
    assertThat(keys.with(List.of("1", "2", "2"), null)).containsExactly(trt("1"), trt("2"));
  }

  @Test
  void keysOfAnotherSourceTakeNoAliases() {
    CorrelationKey header = new CorrelationKey(Source.HEADER, "abc");
    CorrelationKey sglang = new CorrelationKey(Source.SGLANG, "host:1");
    assertThat(new ContextStoreKeys(List.of(header), MAX_KEY_BYTES).with(List.of("2"), null))
        .containsExactly(header);
    assertThat(new ContextStoreKeys(List.of(sglang), MAX_KEY_BYTES).with(List.of("2"), null))
        .containsExactly(sglang);
  }

  @Test
  void onlyTheFirstKeyDecides() {
    CorrelationKey header = new CorrelationKey(Source.HEADER, "abc");
    assertThat(new ContextStoreKeys(List.of(trt("1"), header), MAX_KEY_BYTES).with(List.of("2"), null))
        .containsExactly(trt("1"), header, trt("2"));
  }

  @Test
  void anIdLongerThanTheKeyLimitIsNoAlias() {
    String limit = "1".repeat(MAX_KEY_BYTES);
    String over = "2".repeat(MAX_KEY_BYTES + 1);
    assertThat(new ContextStoreKeys(List.of(), MAX_KEY_BYTES).with(List.of(over, limit), null))
        .containsExactly(trt(limit));
  }

  @Test
  void theClassifiedKeysAreNotChanged() {
    List<CorrelationKey> classified = new java.util.ArrayList<>(List.of(trt("1")));
    ContextStoreKeys keys = new ContextStoreKeys(classified, MAX_KEY_BYTES);
    keys.with(List.of("2"), null);
    classified.add(trt("3"));
    assertThat(keys.with(List.of(), null)).containsExactly(trt("1"));
  }

  static CorrelationKey kvr(String id) {
    return new CorrelationKey(Source.REMOTE_REQUEST_ID, id);
  }

  @Test
  void theKvTransferHandleIsAnAliasAfterEveryClassifiedKey() {
    CorrelationKey xrid = new CorrelationKey(Source.REQUEST_ID, "envoy-1");
    assertThat(new ContextStoreKeys(List.of(xrid), MAX_KEY_BYTES).with(List.of(), "chatcmpl-a-1"))
        .containsExactly(xrid, kvr("chatcmpl-a-1"));
    assertThat(new ContextStoreKeys(List.of(), MAX_KEY_BYTES).with(List.of(), "chatcmpl-a-1"))
        .containsExactly(kvr("chatcmpl-a-1"));
    assertThat(new ContextStoreKeys(List.of(kvr("h")), MAX_KEY_BYTES).with(List.of(), "h"))
        .containsExactly(kvr("h"));
  }

  @Test
  void anEmptyOrOverLongKvTransferHandleIsNoAlias() {
    CorrelationKey xrid = new CorrelationKey(Source.REQUEST_ID, "envoy-1");
    ContextStoreKeys keys = new ContextStoreKeys(List.of(xrid), MAX_KEY_BYTES);
    assertThat(keys.with(List.of(), "")).containsExactly(xrid);
    assertThat(keys.with(List.of(), "h".repeat(MAX_KEY_BYTES + 1))).containsExactly(xrid);
    assertThat(keys.with(List.of(), "é".repeat(MAX_KEY_BYTES / 2 + 1))).containsExactly(xrid);
  }
}
