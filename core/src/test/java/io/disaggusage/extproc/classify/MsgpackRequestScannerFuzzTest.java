package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.disaggusage.extproc.testkit.FuzzInput;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import java.nio.charset.StandardCharsets;
import java.util.Random;

/**
 * Fuzzes {@link MsgpackRequestScanner}: no exception escapes for any bytes, the facts are the same
 * whatever the chunking, and whenever the bytes are a MessagePack document that JSON can express
 * (string keys, no bin or ext, finite floats) they are the JSON reader's facts for its JSON spelling.
 * Corpus: {@code MsgpackRequestScannerFuzzTestInputs/}.
 */
class MsgpackRequestScannerFuzzTest {
  @FuzzTest(maxDuration = "30s")
  void factsAreChunkInvariantAndTheJsonReaders(byte[] input) {
    FuzzInput in = new FuzzInput(input);
    int capture = RequestBodyScannerFuzzTest.CAPTURE[in.choose(RequestBodyScannerFuzzTest.CAPTURE.length)];
    long seed = in.nextInt();
    check(in.document(), capture, new Random(seed));
  }

  static RequestFacts scan(byte[] body, int capture, Random rnd) {
    return RequestBodyScannerFuzzTest.read(new MsgpackRequestScanner(RequestBodyScannerFuzzTest.JSON, capture), body, rnd);
  }

  static void check(byte[] body, int capture, Random rnd) {
    RequestFacts whole = scan(body, capture, null);
    assertThat(scan(body, capture, rnd)).isEqualTo(whole);
    int[] longest = {0};
    String json = MsgpackBodies.toJson(body, longest);
    // A fact's string above the reader's bound reads as absent where Jackson reads it: not compared.
    if (json != null && longest[0] <= Math.max(capture, MsgpackRequestScanner.MIN_FACT_BYTES)) {
      byte[] utf8 = json.getBytes(StandardCharsets.UTF_8);
      assertThat(whole).as(json).isEqualTo(RequestBodyScannerFuzzTest.scan(utf8, capture, null));
    }
  }
}
