package io.disaggusage.extproc.driver;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import org.junit.jupiter.api.Test;

class ReplyRulesTest {
  private static final byte[] ORIGINAL = {1, 2, 3};

  @Test
  void aBodyMutationReplacesClearsOrKeepsTheChunk() {
    assertThat(ReplyRules.mutatedBody(ORIGINAL, BodyMutation.newBuilder().setBody(ByteString.copyFrom(new byte[] {9})).build()))
        .containsExactly(9);
    assertThat(ReplyRules.mutatedBody(ORIGINAL, BodyMutation.newBuilder().setClearBody(true).build())).isEmpty();
    assertThat(ReplyRules.mutatedBody(ORIGINAL, BodyMutation.newBuilder().setClearBody(false).build())).isSameAs(ORIGINAL);
    assertThat(ReplyRules.mutatedBody(ORIGINAL, BodyMutation.getDefaultInstance())).isSameAs(ORIGINAL);
  }

  @Test
  void anOverrideKeepsDefaultHeaderModesAndTakesTheBodyModes() {
    ProcessingMode configured = FilterConfigs.shippedMode();
    ProcessingMode merged =
        ReplyRules.overriddenMode(
            configured,
            ProcessingMode.newBuilder()
                .setResponseHeaderMode(HeaderSendMode.SKIP)
                .setResponseBodyMode(BodySendMode.STREAMED)
                .build());
    assertThat(merged.getRequestHeaderMode()).isEqualTo(HeaderSendMode.SEND);
    assertThat(merged.getResponseHeaderMode()).isEqualTo(HeaderSendMode.SKIP);
    assertThat(merged.getRequestTrailerMode()).isEqualTo(HeaderSendMode.SKIP);
    assertThat(merged.getRequestBodyMode()).isEqualTo(BodySendMode.NONE);
    assertThat(merged.getResponseBodyMode()).isEqualTo(BodySendMode.STREAMED);
  }

  @Test
  void partsCutsNearEqualChunksThatConcatenateToTheBody() {
    assertThat(Chunking.parts(3).split(new byte[] {1, 2, 3, 4, 5, 6, 7}))
        .containsExactly(new byte[] {1, 2}, new byte[] {3, 4}, new byte[] {5, 6, 7});
    assertThat(Chunking.parts(2).split(new byte[0])).containsExactly(new byte[0], new byte[0]);
  }
}
