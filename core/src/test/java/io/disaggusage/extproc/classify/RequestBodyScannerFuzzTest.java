package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.testkit.FuzzInput;
import io.disaggusage.extproc.usage.UsageDocument;
import java.nio.ByteBuffer;
import java.util.Random;

/**
 * Fuzzes {@link RequestBodyScanner}: no exception escapes for any bytes, and the facts are the same
 * whatever the chunking (so a split request body can never change an exchange's phase or key).
 * Corpus: {@code RequestBodyScannerFuzzTestInputs/}.
 */
class RequestBodyScannerFuzzTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final int[] CAPTURE = {64 * 1024, 32, 1};

  @FuzzTest(maxDuration = "30s")
  void factsDoNotDependOnChunking(byte[] input) {
    FuzzInput in = new FuzzInput(input);
    int capture = CAPTURE[in.choose(CAPTURE.length)];
    long seed = in.nextInt();
    check(in.document(), capture, new Random(seed));
  }

  static RequestFacts scan(byte[] body, int capture, Random rnd) {
    return read(new RequestBodyScanner(JSON, capture), body, rnd);
  }

  /** Feeds {@code body} to {@code reader} whole ({@code rnd} null) or in random chunks, 1-byte ones often. */
  static RequestFacts read(RequestBodyReader reader, byte[] body, Random rnd) {
    int i = 0;
    while (i < body.length) {
      int n = rnd == null ? body.length : Math.min(body.length - i, rnd.nextInt(3) == 0 ? 1 : 1 + rnd.nextInt(97));
      // Envoy hands the service read-only protobuf buffers: feed the same kind.
      reader.feed(ByteBuffer.wrap(body, i, n).slice().asReadOnlyBuffer());
      i += n;
    }
    reader.end();
    return reader.facts();
  }

  static void check(byte[] body, int capture, Random rnd) {
    RequestFacts whole = scan(body, capture, null);
    assertThat(scan(body, capture, rnd)).isEqualTo(whole);
  }
}
