package io.disaggusage.extproc.classify;

import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.FuzzInput;
import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The MessagePack request reader gives the JSON reader's facts for the same logical document: every
 * JSON request vector of the JSON reader's tests and fuzz corpus, encoded as MessagePack in each
 * {@link Style}, read whole, split at every single point, and split at random into 1-byte and larger
 * chunks, under the default capture cap and a small one.
 */
class MsgpackRequestScannerTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final int CAP = 64 * 1024;
  static final int[] CAPS = {CAP, 32, 1};
  static final String SCANNER_CORPUS =
      "/io/disaggusage/extproc/classify/RequestBodyScannerFuzzTestInputs/factsDoNotDependOnChunking";

  static RequestFacts msgpack(byte[] body, int cap, int... splits) {
    return ChunkedReads.read(new MsgpackRequestScanner(JSON, cap), body, ChunkedReads.READ_ONLY, splits);
  }

  static RequestFacts json(byte[] body, int cap) {
    RequestBodyScanner s = new RequestBodyScanner(JSON, cap);
    s.feed(ByteBuffer.wrap(body));
    s.end();
    return s.facts();
  }

  /**
   * Every JSON request body of {@link RequestBodyScannerTest} and of the JSON reader's fuzz corpus
   * that is one well-formed object: MessagePack has no spelling for the others (their MessagePack
   * counterparts are in {@link MsgpackRequestFormatsTest}).
   */
  static List<Named<byte[]>> jsonVectors() throws IOException, URISyntaxException {
    List<Named<byte[]>> vectors = new ArrayList<>();
    for (String body : RequestBodyScannerTest.wellFormedBodies()) {
      vectors.add(Named.of(body.length() > 60 ? body.substring(0, 60) + "…" : body, utf8(body)));
    }
    Path corpus = Path.of(MsgpackRequestScannerTest.class.getResource(SCANNER_CORPUS).toURI());
    try (Stream<Path> files = Files.list(corpus)) {
      for (Path file : files.sorted().toList()) {
        byte[] seed = Files.readAllBytes(file);
        byte[] doc = Arrays.copyOf(seed, Math.max(0, seed.length - 16)); // FuzzInput's trailer
        if (!json(doc, CAP).malformed()) {
          vectors.add(Named.of("corpus " + file.getFileName(), doc));
        }
      }
    }
    return vectors;
  }

  /** The corpus documents whose integers MessagePack cannot hold (beyond uint64). */
  static final List<String> NOT_REPRESENTABLE = List.of("corpus huge-counts");

  static Stream<Arguments> vectorsAndStyles() throws IOException, URISyntaxException {
    return jsonVectors().stream()
        .filter(v -> !NOT_REPRESENTABLE.contains(v.getName()))
        .flatMap(v -> Arrays.stream(Style.values()).map(s -> Arguments.of(v, s)));
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("vectorsAndStyles")
  void sameFactsAsTheJsonReaderUnderEverySplit(byte[] json, Style style) {
    byte[] body = MsgpackBodies.fromJson(json, style);
    for (int cap : CAPS) {
      RequestFacts expected = json(json, cap);
      assertThat(msgpack(body, cap)).as("whole, cap %d", cap).isEqualTo(expected);
      for (int k = 0; k <= body.length; k++) {
        assertThat(msgpack(body, cap, k)).as("split at %d, cap %d", k, cap).isEqualTo(expected);
      }
      long seed = System.nanoTime();
      Random random = new Random(seed);
      for (int n = 0; n < 100; n++) {
        int[] splits = random.ints(random.nextInt(body.length < 64 ? 8 : 40), 0, body.length + 1).sorted().toArray();
        assertThat(msgpack(body, cap, splits)).as("seed %d run %d cap %d", seed, n, cap).isEqualTo(expected);
      }
      int[] bytewise = new int[body.length];
      Arrays.setAll(bytewise, i -> i);
      assertThat(msgpack(body, cap, bytewise)).as("bytewise, cap %d", cap).isEqualTo(expected);
    }
  }

  @Test
  void theVectorsAreTheOnesTheJsonReaderIsTestedWith() throws Exception {
    List<Named<byte[]>> vectors = jsonVectors();
    assertThat(vectors).hasSizeGreaterThan(40);
    for (String name : NOT_REPRESENTABLE) {
      byte[] doc = vectors.stream().filter(v -> v.getName().equals(name)).findFirst().orElseThrow().getPayload();
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> MsgpackBodies.fromJson(doc, Style.COMPACT))
          .isInstanceOf(MsgpackBodies.NotRepresentable.class);
    }
    // The TensorRT-LLM generation vector reads as the JSON test expects it to, through MessagePack too.
    RequestFacts f = msgpack(MsgpackBodies.fromJson(RequestBodyScannerTest.TRT_GEN, Style.COMPACT), CAP);
    assertThat(f.trtCtxRequestId()).isEqualTo("9223372036854775807");
    assertThat(f.trtDisaggRequestId()).isEqualTo("2748779069441234567");
    assertThat(f.trtCtxUsage().details()).containsEntry("audio_tokens", "null");
  }

}
