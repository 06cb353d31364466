package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.rewrite.JsonBodies.Body;
import io.disaggusage.extproc.json.JsonObjectView;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The streaming rewriter against the holding one it replaced ({@link BufferedJsonRewriter}), for
 * every body of {@link JsonBodies} in every flow, split at every point, byte by byte, and at random
 * with empty chunks: the client sees the same bytes and the report says the same. Where behaviour.md
 * lets them differ it is asserted as documented: a body with nothing to rewrite (no usage, malformed,
 * an oversize usage object) does not wait for the context usage, so its outcome is the one it has
 * with the context known; the streaming rewriter names the model whenever the body is well-formed.
 * Random mutations of real bodies (mostly malformed ones) must give the same bytes too.
 */
class GenerationJsonRewriterDifferentialTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final int MAX_USAGE = 512;
  static final JsonUsageRewriter REWRITER = new JsonUsageRewriter(JSON, MAX_USAGE);
  static final int MAX_BODY = 1 << 20;
  static final ContextUsage CTX =
      new ContextUsage(BigInteger.valueOf(101), Map.of("cached_tokens", "7"), BigInteger.valueOf(7));

  /** How the context usage comes. */
  enum Flow {
    /** Known before the body (context-first). */
    KNOWN,
    /** Asked for at the end of the body, then found (concurrent). */
    CONCURRENT,
    /** Asked for at the end of the body, never found. */
    TIMEOUT
  }

  /** What the client got and what was reported. */
  record Run(byte[] out, ExchangeReport report, boolean waited, int beforeFinish) {}

  static Run run(GenerationRewriter p, List<byte[]> chunks, Flow flow) {
    if (flow == Flow.KNOWN) {
      p.resolveContext(CTX, null);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] chunk : chunks) {
      p.accept(chunk);
      out.writeBytes(p.takeReady());
      assertThat(p.wantsContext()).isFalse();
    }
    int beforeFinish = out.size();
    p.finish();
    boolean waited = p.wantsContext();
    if (waited) {
      assertThat(p.waiting()).isTrue();
      out.writeBytes(p.takeReady());
      p.resolveContext(flow == Flow.CONCURRENT ? CTX : null, Outcome.CONTEXT_TIMEOUT);
    }
    out.writeBytes(p.takeReady());
    assertThat(p.waiting()).isFalse();
    assertThat(p.wantsContext()).isFalse();
    return new Run(out.toByteArray(), p.report(), waited, beforeFinish);
  }

  static GenerationJsonRewriter streaming(Body body) {
    return new GenerationJsonRewriter(REWRITER, body.names(), MAX_BODY);
  }

  static BufferedJsonRewriter buffered(Body body) {
    return new BufferedJsonRewriter(REWRITER, body.names(), MAX_BODY);
  }

  /** Every chunking a body is fed in: whole, every split point, bytewise, random with empty chunks. */
  static List<List<byte[]>> chunkings(byte[] doc, long seed) {
    List<List<byte[]>> all = new ArrayList<>();
    all.add(List.of(doc));
    int step = doc.length <= 4096 ? 1 : Math.max(1, doc.length / 512);
    for (int cut = 0; cut <= doc.length; cut += step) {
      all.add(List.of(Arrays.copyOfRange(doc, 0, cut), Arrays.copyOfRange(doc, cut, doc.length)));
    }
    if (doc.length <= 8192) {
      List<byte[]> bytewise = new ArrayList<>();
      for (byte x : doc) {
        bytewise.add(new byte[] {x});
      }
      all.add(bytewise);
    }
    Random random = new Random(seed);
    for (int n = 0; n < 24; n++) {
      List<byte[]> chunks = new ArrayList<>();
      int off = 0;
      while (off < doc.length) {
        int len = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(Math.max(1, Math.min(doc.length, 1 + random.nextInt(64))));
        len = Math.min(len, doc.length - off);
        chunks.add(Arrays.copyOfRange(doc, off, off + len));
        off += len;
      }
      if (random.nextBoolean()) {
        chunks.add(new byte[0]);
      }
      all.add(chunks);
    }
    return all;
  }

  /** Where the effective usage object starts (Jackson's reading), or -1 when there is none to rewrite. */
  static int usageStart(byte[] doc) {
    try {
      JsonObjectView usage = UsageDocument.parse(JSON, doc).usage();
      return usage == null || usage.end() - usage.start() > MAX_USAGE ? -1 : usage.start();
    } catch (UsageDocument.MalformedException e) {
      return -1;
    }
  }

  static Stream<Body> wellFormed() {
    return JsonBodies.wellFormed().stream();
  }

  static Stream<Body> malformed() {
    return JsonBodies.malformed().stream();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("wellFormed")
  void sameBytesAndReportAsTheBufferedRewriter(Body body) throws Exception {
    assertThat(UsageDocument.parse(JSON, body.bytes())).isNotNull();
    compareEverywhere(body);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("malformed")
  void malformedBodiesComeOutByteIdenticalAsParseErrors(Body body) {
    for (Flow flow : Flow.values()) {
      Run reference = run(buffered(body), List.of(body.bytes()), flow);
      assertThat(reference.out()).isEqualTo(body.bytes());
    }
    compareEverywhere(body);
    for (List<byte[]> chunks : chunkings(body.bytes(), body.label().hashCode())) {
      Run s = run(streaming(body), chunks, Flow.KNOWN);
      assertThat(s.report().outcome()).as(body.label()).isEqualTo(Outcome.PARSE_ERROR);
      assertThat(s.report().model()).isNull();
    }
  }

  @Test
  void randomMutationsOfRealBodiesGiveTheBufferedOutput() {
    byte[] alphabet =
        JsonBodies.concat(
            JsonBodies.bytes("{}[]\":,\\ 0-1.eEtnu\n\tusage"),
            new byte[] {0, 0x1F, 0x7F, (byte) 0x80, (byte) 0xC3, (byte) 0xED, (byte) 0xF8, (byte) 0xFF});
    List<Body> seeds =
        List.of(
            JsonBodies.chat("chat", Wire.chatCompletion("g", JsonBodies.USAGE)),
            JsonBodies.chat("usage first", "{\"usage\":" + JsonBodies.USAGE + ",\"model\":\"m\",\"usage\":" + JsonBodies.USAGE_2 + "}"));
    Random random = new Random(11);
    int rewritten = 0;
    int other = 0;
    for (Body seed : seeds) {
      for (int n = 0; n < 3000; n++) {
        byte[] doc = seed.bytes().clone();
        for (int e = 1 + random.nextInt(3); e > 0; e--) {
          doc[random.nextInt(doc.length)] = alphabet[random.nextInt(alphabet.length)];
        }
        Body body = JsonBodies.raw(seed.label() + " mutated", doc);
        for (Flow flow : Flow.values()) {
          Run reference = run(buffered(body), List.of(doc), flow);
          Run known = run(buffered(body), List.of(doc), Flow.KNOWN);
          List<List<byte[]>> chunkings = chunkings(doc, n);
          for (List<byte[]> chunks : List.of(chunkings.get(0), chunkings.get(chunkings.size() - 1), chunkings.get(1 + random.nextInt(doc.length)))) {
            Run s = run(streaming(body), chunks, flow);
            String as = new String(doc, StandardCharsets.ISO_8859_1) + ", " + flow;
            assertThat(s.out()).as(as).isEqualTo(reference.out());
            ExchangeReport expected = s.waited() || flow == Flow.KNOWN ? reference.report() : known.report();
            assertThat(s.report().outcome()).as(as).isEqualTo(expected.outcome());
            assertThat(s.report().figures()).as(as).isEqualTo(expected.figures());
            if (s.report().outcome() == Outcome.REWRITTEN) {
              rewritten++;
            } else {
              other++;
            }
          }
        }
      }
    }
    assertThat(rewritten).isGreaterThan(1000);
    assertThat(other).isGreaterThan(1000);
  }

  private void compareEverywhere(Body body) {
    byte[] doc = body.bytes();
    int usageStart = usageStart(doc);
    Run known = run(buffered(body), List.of(doc), Flow.KNOWN);
    for (Flow flow : Flow.values()) {
      Run reference = run(buffered(body), List.of(doc), flow);
      for (List<byte[]> chunks : chunkings(doc, body.label().hashCode() + flow.ordinal())) {
        Run s = run(streaming(body), chunks, flow);
        String as = body.label() + ", " + flow + ", " + chunks.size() + " chunks, first "
            + (chunks.isEmpty() ? 0 : chunks.get(0).length);
        assertThat(new String(s.out(), StandardCharsets.ISO_8859_1))
            .as(as)
            .isEqualTo(new String(reference.out(), StandardCharsets.ISO_8859_1));
        // Bytes before the usage object went out before the body ended; the rest was held.
        if (s.report().outcome() != Outcome.PARSE_ERROR || usageStart >= 0) {
          assertThat(s.beforeFinish()).as(as + ": forwarded before the end").isEqualTo(usageStart >= 0 ? usageStart : doc.length);
        }
        Run expected = reference;
        if (flow != Flow.KNOWN && s.waited()) {
          assertThat(reference.waited()).as(as).isTrue();
        } else if (flow != Flow.KNOWN) {
          assertThat(known.report().outcome()).as(as).isNotEqualTo(Outcome.REWRITTEN);
          expected = known; // nothing to rewrite: no wait, the outcome it has with the context known
        }
        assertThat(s.report().outcome()).as(as).isEqualTo(expected.report().outcome());
        assertThat(s.report().figures()).as(as).isEqualTo(expected.report().figures());
        assertThat(s.report().corrected()).as(as).isEqualTo(expected.report().corrected());
        if (expected.report().model() != null) {
          assertThat(s.report().model()).as(as).isEqualTo(expected.report().model());
        }
      }
    }
  }
}
