package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** A chunk's bytes come without a copy when protobuf holds them as one exact array, else copied. */
class BodyBytesTest {
  private static final byte[] TEXT = "data: {\"choices\":[]}\n\n".getBytes(StandardCharsets.UTF_8);

  @Test
  void aParsedBodyIsItsOwnBackingArrayNotACopy() throws Exception {
    byte[] wire = ProcessingRequest.newBuilder()
        .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(TEXT)).setEndOfStream(true))
        .build()
        .toByteArray();
    ByteString body = ProcessingRequest.parseFrom(wire).getResponseBody().getBody();
    byte[] first = BodyBytes.of(body);
    assertThat(first).isEqualTo(TEXT);
    assertThat(BodyBytes.of(body)).isSameAs(first); // the same array each time: nothing was copied
  }

  @Test
  void slicesRopesAndDirectBuffersAreCopiedWithTheirExactBytes() {
    ByteString whole = ByteString.copyFrom(TEXT);
    ByteString slice = whole.substring(3, 10);
    assertThat(BodyBytes.of(slice)).isEqualTo(java.util.Arrays.copyOfRange(TEXT, 3, 10));
    ByteString rope = ByteString.copyFrom(TEXT, 0, 5).concat(ByteString.copyFrom(TEXT, 5, TEXT.length - 5));
    assertThat(BodyBytes.of(rope)).isEqualTo(TEXT);
    ByteBuffer direct = ByteBuffer.allocateDirect(TEXT.length).put(TEXT).flip();
    assertThat(BodyBytes.of(UnsafeByteOperations.unsafeWrap(direct))).isEqualTo(TEXT);
    assertThat(BodyBytes.of(ByteString.EMPTY)).isEmpty();
  }
}
