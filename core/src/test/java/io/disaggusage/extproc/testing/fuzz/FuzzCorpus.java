package io.disaggusage.extproc.testing.fuzz;

import static io.disaggusage.extproc.testing.Text.utf8;

import io.disaggusage.extproc.testkit.FuzzInput;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import io.disaggusage.extproc.sse.SseEvent;
import io.disaggusage.extproc.sse.SseFramer;
import io.disaggusage.extproc.sse.SseItem;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The seed corpora of the fuzz tests, generated from the engine vectors ({@link ScenarioVectors}) plus
 * the bad inputs the reliability work lists (invalid UTF-8, deep nesting, duplicate {@code usage}
 * keys, numbers as strings, negative, huge and float counts, {@code usage: null}, truncated JSON, long
 * {@code data:} lines, NUL bytes, CR-only line ends, a BOM), and the request reader's seeds spelled as
 * MessagePack with bodies only MessagePack has. Jazzer reads them from
 * {@code src/test/resources/<package>/<Class>Inputs/<method>/}; {@code FuzzCorpusTest} fails when the
 * committed files differ from what this class generates, and {@code main} rewrites them:
 * {@code java -cp <core test classpath> io.disaggusage.extproc.testing.fuzz.FuzzCorpus .} from the project root
 * (each seed goes to the test resources of the module whose fuzz test reads it: {@link #resources}).
 * Multi-megabyte cases are not committed: the explicit bad-input tests build them.
 */
public final class FuzzCorpus {
  private FuzzCorpus() {}

  static final String REWRITER = "io/disaggusage/extproc/usage/JsonUsageRewriterFuzzTestInputs/rewriteIsTheRuleOrNothing/";
  static final String FRAMER = "io/disaggusage/extproc/sse/SseFramerFuzzTestInputs/framingIsLosslessBoundedAndChunkInvariant/";
  static final String SCANNER = "io/disaggusage/extproc/classify/RequestBodyScannerFuzzTestInputs/factsDoNotDependOnChunking/";
  static final String EXCHANGE = "io/disaggusage/extproc/stream/ExchangeStreamFuzzTestInputs/generationBodyIsRewrittenOrUntouched/";
  static final String MESSAGES = "io/disaggusage/extproc/stream/ExchangeMessagesFuzzTestInputs/arbitraryMessageSequences/";
  static final String MSGPACK_SCANNER =
      "io/disaggusage/extproc/classify/MsgpackRequestScannerFuzzTestInputs/factsAreChunkInvariantAndTheJsonReaders/";

  static final String USAGE = "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";

  /** Bad JSON documents, named. */
  static Map<String, byte[]> badJson() {
    Map<String, byte[]> m = new LinkedHashMap<>();
    m.put("invalid-utf8", latin1("{\"model\":\"m\u00C3\u0028\",\"usage\":" + USAGE + "}"));
    m.put("invalid-utf8-in-usage", latin1("{\"usage\":{\"prompt_tokens\":101,\"\u00FF\":1,\"completion_tokens\":13}}"));
    m.put("deep-nesting", utf8("{\"x\":" + "[".repeat(1200) + "]".repeat(1200) + ",\"usage\":" + USAGE + "}"));
    m.put("deep-objects", utf8("{\"a\":".repeat(600) + "{\"usage\":" + USAGE + "}" + "}".repeat(600)));
    m.put("duplicate-usage", utf8("{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"usage\":" + USAGE + "}"));
    m.put("duplicate-usage-null-last", utf8("{\"usage\":" + USAGE + ",\"usage\":null}"));
    m.put("duplicate-count-keys", utf8("{\"usage\":{\"prompt_tokens\":5,\"prompt_tokens\":101,\"completion_tokens\":2,\"completion_tokens\":3}}"));
    m.put("numbers-as-strings", utf8("{\"usage\":{\"prompt_tokens\":\"101\",\"completion_tokens\":\"13\",\"prompt_tokens_details\":{\"cached_tokens\":\"101\"}}}"));
    m.put("negative-counts", utf8("{\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":-13,\"prompt_tokens_details\":{\"cached_tokens\":-5}}}"));
    m.put("huge-counts", utf8("{\"usage\":{\"prompt_tokens\":123456789012345678901234567890,\"completion_tokens\":98765432109876543210,\"total_tokens\":1}}"));
    m.put("float-counts", utf8("{\"usage\":{\"prompt_tokens\":101.0,\"completion_tokens\":1.3e1,\"total_tokens\":114e0}}"));
    m.put("usage-null", utf8("{\"model\":\"m\",\"usage\":null}"));
    m.put("details-null", utf8("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"prompt_tokens_details\":null}}"));
    m.put("details-not-object", utf8("{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"prompt_tokens_details\":[1]}}"));
    String whole = "{\"model\":\"m\",\"usage\":" + USAGE + "}";
    m.put("truncated-in-usage", utf8(whole.substring(0, whole.length() - 20)));
    m.put("truncated-last-brace", utf8(whole.substring(0, whole.length() - 1)));
    m.put("trailing-garbage", utf8(whole + "x"));
    m.put("two-documents", utf8(whole + whole));
    m.put("nul-bytes", utf8("{\"a\":\"x\u0000\",\"usage\":" + USAGE + "}\u0000"));
    m.put("bom", concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}, utf8(whole)));
    m.put("utf16", whole.getBytes(StandardCharsets.UTF_16LE));
    m.put("escaped-usage-key", utf8("{\"us\\u0061ge\":" + USAGE + "}"));
    m.put("response-usage", utf8("{\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":98,\"output_tokens\":8,\"input_tokens_details\":{\"cached_tokens\":98}}}}"));
    m.put("long-string", utf8("{\"content\":\"" + "x".repeat(70_000) + "\",\"usage\":" + USAGE + "}"));
    return m;
  }

  /** Bad SSE streams, named. */
  static Map<String, byte[]> badSse() {
    String usageEvent = "data: {\"choices\":[],\"usage\":" + USAGE + "}\n\n";
    String stream = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n" + usageEvent + "data: [DONE]\n\n";
    Map<String, byte[]> m = new LinkedHashMap<>();
    m.put("cr-only", utf8(stream.replace("\n", "\r")));
    m.put("crlf", utf8(stream.replace("\n", "\r\n")));
    m.put("mixed-line-ends", utf8(stream.replaceFirst("\n\n", "\r\n\r").replace("[DONE]\n", "[DONE]\r\n")));
    m.put("bom", concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}, utf8(stream)));
    m.put("nul-bytes", utf8(stream.replace("content", "con\u0000tent") + "\u0000\n\n"));
    m.put("invalid-utf8", concat(latin1("data: {\"x\":\"\u00FF\u00FE\"}\n\n"), utf8(usageEvent)));
    m.put("long-data-line", utf8("data: {\"choices\":[{\"delta\":{\"content\":\"" + "y".repeat(70_000) + "\"}}],\"usage\":" + USAGE + "}\n\n"));
    m.put("multi-line-data", utf8("data: {\"choices\":[],\n data: \"usage\":\ndata: " + USAGE + "}\n\n"));
    m.put("no-final-blank-line", utf8(stream.substring(0, stream.length() - 2)));
    m.put("truncated-usage-event", utf8(usageEvent.substring(0, usageEvent.length() - 10)));
    m.put("usage-null-event", utf8("data: {\"usage\":null}\n\n"));
    m.put("comments-and-fields", utf8(": keep-alive\n\nevent: x\nid: 1\nretry: 5\ndata:" + usageEvent.substring(5)));
    m.put("blank-lines-only", utf8("\n\n\r\n\r\r\n"));
    for (Map.Entry<String, byte[]> e : badJson().entrySet()) {
      if (!e.getKey().equals("utf16") && !e.getKey().equals("long-string")) {
        m.put("json-" + e.getKey(), concat(utf8("data: "), e.getValue(), utf8("\n\n")));
      }
    }
    return m;
  }

  /** Every seed file: path relative to the test resources, and content. */
  public static Map<String, byte[]> seeds() {
    Map<String, byte[]> seeds = new LinkedHashMap<>();
    List<Vector> vectors = ScenarioVectors.all();
    for (int i = 0; i < vectors.size(); i++) {
      Vector v = vectors.get(i);
      String n = v.name();
      boolean sse = v.generation().contentType().startsWith("text/event-stream");
      if (sse) {
        seeds.put(FRAMER + n, FuzzInput.seed(v.generation().responseBody(), i, 0, 0, 1, 7, 13));
        int k = 0;
        for (SseItem item : SseFramer.frameAll(v.generation().responseBody(), 1 << 20)) {
          if (item instanceof SseEvent e && e.mayContainUsage()) {
            seeds.put(REWRITER + n + "-event-" + k++, FuzzInput.seed(e.payloadBytes(), i, i + 1, i));
          }
        }
      } else {
        seeds.put(REWRITER + n, FuzzInput.seed(v.generation().responseBody(), i, i + 1, i));
      }
      seeds.put(EXCHANGE + n, FuzzInput.seed(v.generation().responseBody(), vectorIndex(v), 0, sse ? 1 : 0, i & 1, 0, 0, 0, 42 + i));
      seeds.put(SCANNER + n + "-generation", FuzzInput.seed(v.generation().requestBody(), i, 0, 0, 0, 5 + i));
      if (v.context() != null) {
        seeds.put(SCANNER + n + "-context", FuzzInput.seed(v.context().requestBody(), i, 0, 0, 0, 9 + i));
        seeds.put(REWRITER + n + "-context", FuzzInput.seed(v.context().responseBody(), i, i, 2));
      }
    }
    badJson().forEach((name, doc) -> {
      seeds.put(REWRITER + name, FuzzInput.seed(doc, 3, 2, 0));
      seeds.put(SCANNER + name, FuzzInput.seed(doc, 0, 0, 0, 0, 3));
      seeds.put(EXCHANGE + "json-" + name, FuzzInput.seed(doc, 0, 0, 0, 0, 0, 0, 0, 9));
    });
    badSse().forEach((name, stream) -> {
      seeds.put(FRAMER + name, FuzzInput.seed(stream, 2, 0, 0, 0, 3, 5));
      seeds.put(EXCHANGE + "sse-" + name, FuzzInput.seed(stream, 1, 1, 1, 1, 0, 0, 0, 17));
    });
    seeds.put(SCANNER + "ctx-usage-carried", utf8(
        "{\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":1,\"ctx_usage\":{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}}}"));
    seeds.put(SCANNER + "sglang-batched", utf8("{\"bootstrap_host\":\"h\",\"bootstrap_room\":[1,2],\"kv_transfer_params\":{\"do_remote_prefill\":true}}"));
    seeds.put(SCANNER + "nested-look-alikes", utf8("{\"messages\":[{\"disaggregated_params\":{\"request_type\":\"context_only\"}}],\"kv_transfer_params\":[]}"));
    messageSequences().forEach((name, ops) -> seeds.put(MESSAGES + name, ops));
    seeds.putAll(msgpackScannerSeeds(seeds));
    return seeds;
  }

  /**
   * The JSON request reader's seeds spelled as MessagePack in turn in each {@link Style} (those that are
   * one JSON document MessagePack can spell), and bodies only MessagePack has: bin and ext values, a
   * non-string key, the never-used byte, a truncated body, a byte after the root map.
   */
  static Map<String, byte[]> msgpackScannerSeeds(Map<String, byte[]> seeds) {
    Map<String, byte[]> m = new LinkedHashMap<>();
    int i = 0;
    for (Map.Entry<String, byte[]> e : seeds.entrySet()) {
      if (!e.getKey().startsWith(SCANNER)) {
        continue;
      }
      byte[] json = new FuzzInput(e.getValue()).document();
      Style style = Style.values()[i % Style.values().length];
      try {
        m.put(MSGPACK_SCANNER + e.getKey().substring(SCANNER.length()),
            FuzzInput.seed(MsgpackBodies.fromJson(json, style), i, 0, 0, 0, 7 + i));
      } catch (RuntimeException noMsgpackSpelling) {
        continue; // malformed JSON, or integers beyond MessagePack's range
      }
      i++;
    }
    byte[] trt = MsgpackBodies.fromJson(
        "{\"model\":\"m\",\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":2748779069441234567,"
            + "\"ctx_usage\":{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}},\"stream\":true}",
        Style.COMPACT);
    m.put(MSGPACK_SCANNER + "truncated", FuzzInput.seed(Arrays.copyOf(trt, trt.length - 5), 1, 0, 0, 0, 3));
    m.put(MSGPACK_SCANNER + "trailing-byte", FuzzInput.seed(concat(trt, new byte[] {(byte) 0xc0}), 0, 0, 0, 0, 4));
    m.put(MSGPACK_SCANNER + "never-used-byte", FuzzInput.seed(MsgpackBodies.pack(p -> p.packMapHeader(1).packString("a")
        .writePayload(new byte[] {(byte) 0xc1})), 0, 0, 0, 0, 5));
    m.put(MSGPACK_SCANNER + "integer-key", FuzzInput.seed(MsgpackBodies.pack(p -> p.packMapHeader(2).packInt(1).packInt(2)
        .packString("model").packString("m")), 0, 0, 0, 0, 6));
    m.put(MSGPACK_SCANNER + "bin-and-ext", FuzzInput.seed(MsgpackBodies.pack(p -> {
      p.packMapHeader(3).packString("model").packBinaryHeader(2).writePayload(new byte[] {'m', 0});
      p.packString("x").packExtensionTypeHeader((byte) 5, 16).writePayload(new byte[16]);
      p.packString("disaggregated_params").packMapHeader(2).packString("request_type").packString("context_only");
      p.packString("ctx_usage").packMapHeader(1).packString("prompt_tokens").packBinaryHeader(1).writePayload(new byte[] {1});
    }), 2, 0, 0, 0, 8));
    return m;
  }

  /** Index among the vectors ExchangeStreamFuzzTest draws from (JSON context legs). */
  private static int vectorIndex(Vector v) {
    List<Vector> usable =
        ScenarioVectors.all().stream()
            .filter(x -> x.order() != ScenarioVectors.Order.CARRIED && x.context().contentType().equals("application/json"))
            .toList();
    int i = usable.indexOf(v);
    return Math.max(i, 0);
  }

  /**
   * Operation sequences for ExchangeMessagesFuzzTest: context exchange on stream 0 then generation on
   * stream 1, and the same with duplicates, a reset and a body before its headers.
   */
  static Map<String, byte[]> messageSequences() {
    Map<String, byte[]> m = new LinkedHashMap<>();
    // op byte: bit0 stream, bits1-3 kind, bit4 fixed body, bit6 end_of_stream; then an argument byte.
    byte[] ctxThenGen = {
      0, (byte) (8 | 16 | 1 * 4), // stream 0: request headers, context cluster, phase context
      2 | 64, 1, // request body (vLLM context body), end
      4, 0, // response headers 200 json
      6 | 16 | 64, 0, // response body: context usage JSON, end
      12, 0, // complete
      1, (byte) (8 | 16 | 2 * 4), // stream 1: request headers, generation cluster, phase decode
      3 | 64, 1,
      5, 0,
      7 | 16 | 64, 0,
      7 | 16 | 64, 0, // duplicate end_of_stream
      13, 1, // reset
    };
    m.put("context-then-generation-duplicate-eos", ctxThenGen);
    m.put("body-before-headers", new byte[] {6, 10, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 0, 0});
    m.put("unhandled-path-then-bodies", new byte[] {0, 3, 2, 5, 'x', 'y', 'z', 'w', 'v', 4, 0, 6 | 64, 3, 'a', 'b', 'c'});
    m.put("concurrent-generation-waits", new byte[] {1, (byte) (64 | 8 | 16 | 2 * 4 | 16 << 0), 3 | 64, 1, 5, 8, 7 | 16, 0, 7 | 64, 0});
    return m;
  }

  static byte[] latin1(String s) {
    return s.getBytes(StandardCharsets.ISO_8859_1);
  }

  static byte[] concat(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) {
      n += p.length;
    }
    byte[] out = new byte[n];
    int at = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, out, at, p.length);
      at += p.length;
    }
    return out;
  }

  /**
   * The test resources directory, below the project root, of the module whose fuzz test reads the seed
   * at {@code path}: the stream's fuzz tests are the server's, every other one the core's.
   */
  static Path resources(Path projectRoot, String path) {
    String module = path.startsWith("io/disaggusage/extproc/stream/") ? "server" : "core";
    return projectRoot.resolve(module).resolve("src/test/resources").resolve(path);
  }

  /** Writes every seed below the project root {@code args[0]}. */
  public static void main(String[] args) throws IOException {
    Path root = Path.of(args[0]);
    List<String> written = new ArrayList<>();
    for (Map.Entry<String, byte[]> e : seeds().entrySet()) {
      Path file = resources(root, e.getKey());
      Files.createDirectories(file.getParent());
      Files.write(file, e.getValue());
      written.add(e.getKey());
    }
    System.out.println(written.size() + " seed files written");
  }
}
