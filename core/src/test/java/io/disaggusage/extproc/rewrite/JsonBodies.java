package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.usage.ApiShape;
import io.disaggusage.extproc.usage.ApiShapes;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Generation response bodies for the streaming JSON rewriter's tests: engine shapes, layouts that
 * put usage anywhere, look-alikes of usage, duplicates, every kind of JSON token, and malformed
 * documents with the error before, inside and after the usage object.
 */
final class JsonBodies {
  private JsonBodies() {}

  /** One body and the usage names of its API. */
  record Body(String label, byte[] bytes, ApiShape names) {
    @Override
    public String toString() {
      return label;
    }
  }

  static final String USAGE =
      "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";
  static final String USAGE_2 = "{\"prompt_tokens\":999,\"completion_tokens\":8,\"total_tokens\":1007}";
  static final String RESPONSES_USAGE =
      "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
  /** A usage object above the tests' 512-byte {@code max_usage_bytes}. */
  static final String BIG_USAGE =
      "{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7,\"note\":\"" + "n".repeat(600) + "\"}";

  static Body chat(String label, String text) {
    return new Body(label, text.getBytes(StandardCharsets.UTF_8), ApiShapes.CHAT);
  }

  static Body raw(String label, byte[] bytes) {
    return new Body(label, bytes, ApiShapes.CHAT);
  }

  /** A chat completion whose choices carry {@code tokens} logprobs entries (numbers of every form). */
  static String withLogprobs(int tokens, String usage) {
    StringBuilder sb =
        new StringBuilder("{\"id\":\"chatcmpl-lp\",\"object\":\"chat.completion\",\"created\":1764400000,\"model\":\"")
            .append(Wire.MODEL)
            .append("\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"");
    for (int i = 0; i < tokens; i++) {
      sb.append("tok").append(i).append(' ');
    }
    sb.append("\"},\"logprobs\":{\"content\":[");
    for (int i = 0; i < tokens; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append("{\"token\":\"tok").append(i).append(" \",\"logprob\":-").append(i % 7).append('.').append(1000 + i)
          .append("e-").append(i % 3).append(",\"bytes\":[116,111,107],\"top_logprobs\":[{\"token\":\"\\u00e9\\\"\",\"logprob\":")
          .append(i % 2 == 0 ? "-0" : "-1.5E+2").append(",\"bytes\":null}]}");
    }
    sb.append("]},\"finish_reason\":\"stop\"}],\"usage\":").append(usage).append('}');
    return sb.toString();
  }

  /** Well-formed bodies. */
  static List<Body> wellFormed() {
    List<Body> b = new ArrayList<>();
    // Engine shapes (scenario bodies and the golden vectors' generation documents).
    b.add(chat("chat completion", Wire.chatCompletion("g", USAGE)));
    b.add(chat("chat completion, G9a", Wire.chatCompletion("r-9", Wire.usage(999, 8, 999L))));
    b.add(chat("completion", Wire.completion(Wire.usage(17, 16, 17L))));
    b.add(chat("trt context-shaped", Wire.trtContextResponse("2748779069441234567", "2748779069441234567", USAGE)));
    b.add(new Body("responses api", Wire.response(RESPONSES_USAGE).getBytes(StandardCharsets.UTF_8), ApiShapes.RESPONSES));
    b.add(new Body(
        "responses event shape: usage inside response",
        ("{\"type\":\"response.completed\",\"sequence_number\":2,\"response\":" + Wire.response(RESPONSES_USAGE) + "}")
            .getBytes(StandardCharsets.UTF_8),
        ApiShapes.RESPONSES));
    b.add(new Body("anthropic message", Wire.message(Wire.messagesUsage(0, 8, 0L, 101L)).getBytes(StandardCharsets.UTF_8),
        ApiShapes.MESSAGES));
    b.add(new Body("anthropic older vllm, already right", Wire.message(Wire.messagesUsage(101, 8, null, null))
        .getBytes(StandardCharsets.UTF_8), ApiShapes.MESSAGES));
    b.add(new Body(
        "anthropic message_start shape: usage inside message",
        ("{\"type\":\"message_start\",\"message\":" + Wire.message(Wire.messagesUsage(101, 0, null, null)) + "}")
            .getBytes(StandardCharsets.UTF_8),
        ApiShapes.MESSAGES));
    b.add(chat("g6", "{\"id\":\"x\",\"usage\":" + USAGE + "}"));
    b.add(chat("g10 siblings", "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":100,\"audio_tokens\":2},\"future_field\":7}}"));
    b.add(chat("g10 null details", "{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}}"));
    b.add(chat("g11 no details", "{\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":3}}"));
    b.add(chat("already correct", "{\"usage\":{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":7}}}"));
    b.add(chat("beyond 2^53", "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":9007199254740993,\"total_tokens\":2}}"));
    b.add(chat("duplicate keys inside usage", "{\"usage\":{\"completion_tokens\":1,\"completion_tokens\":4,\"prompt_tokens\":10,\"total_tokens\":14}}"));
    b.add(chat("empty details", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{}}}"));
    // Where usage sits.
    b.add(chat("usage first", "{\"usage\":" + USAGE + ",\"id\":\"a\",\"choices\":[{\"index\":0,\"text\":\"x\"}],\"model\":\"m\"}"));
    b.add(chat("usage in the middle", "{\"id\":\"a\",\"model\":\"m\",\"usage\":" + USAGE + ",\"choices\":[{\"index\":0,\"text\":\"x\"}]}"));
    b.add(chat("only usage", "{\"usage\":" + USAGE + "}"));
    b.add(chat("logprobs, usage last", withLogprobs(40, USAGE)));
    b.add(chat("model after usage", "{\"usage\":" + USAGE + ",\"model\":\"after\"}"));
    // Look-alikes.
    b.add(chat("nested objects named usage", "{\"meta\":{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}},\"choices\":[{\"usage\":" + USAGE_2 + "}],\"usage\":" + USAGE + ",\"tail\":{\"usage\":{}}}"));
    b.add(chat("only nested usage", "{\"meta\":{\"usage\":" + USAGE + "},\"choices\":[{\"usage\":" + USAGE + "}]}"));
    b.add(chat("usage inside strings", "{\"content\":\"he said \\\"usage\\\": {\\\"prompt_tokens\\\": 1}\",\"k\":\"\\\\\",\"\\\"usage\\\"\":" + USAGE_2 + ",\"usage\":" + USAGE + "}"));
    b.add(chat("escaped member name", "{\"id\":\"a\",\"us\\u0061ge\":" + USAGE + "}"));
    b.add(chat("names that are not usage", "{\"usage \":" + USAGE + ",\"Usage\":" + USAGE + ",\"usages\":" + USAGE + ",\"usag\":" + USAGE + "}"));
    b.add(chat("response that is not an object", "{\"response\":\"usage\",\"usage\":" + USAGE + "}"));
    b.add(chat("usage in a nested response", "{\"x\":{\"response\":{\"usage\":" + USAGE + "}},\"usage\":" + USAGE_2 + "}"));
    b.add(chat("usage in a nested message", "{\"choices\":[{\"message\":{\"usage\":" + USAGE + "}}],\"usage\":" + USAGE_2 + "}"));
    // Duplicates: the last one wins.
    b.add(chat("usage twice", "{\"usage\":" + USAGE_2 + ",\"id\":\"a\",\"usage\":" + USAGE + "}"));
    b.add(chat("usage then null", "{\"usage\":" + USAGE + ",\"id\":\"a\",\"usage\":null}"));
    b.add(chat("null then usage", "{\"usage\":null,\"id\":\"a\",\"usage\":" + USAGE + "}"));
    b.add(chat("usage then number", "{\"usage\":" + USAGE + ",\"usage\":5,\"x\":1}"));
    b.add(chat("usage then array", "{\"usage\":" + USAGE + ",\"usage\":[" + USAGE + "]}"));
    b.add(chat("usage then response usage", "{\"usage\":" + USAGE_2 + ",\"response\":{\"usage\":" + USAGE + "}}"));
    b.add(chat("message usage then usage", "{\"message\":{\"usage\":" + USAGE + ",\"model\":\"mm\"},\"usage\":" + USAGE_2 + "}"));
    b.add(chat("oversize then small", "{\"usage\":" + BIG_USAGE + ",\"id\":\"a\",\"usage\":" + USAGE + "}"));
    b.add(chat("small then oversize", "{\"usage\":" + USAGE + ",\"id\":\"a\",\"usage\":" + BIG_USAGE + "}"));
    b.add(chat("three usages", "{\"usage\":" + USAGE + ",\"usage\":" + USAGE_2 + ",\"usage\":" + USAGE + "}"));
    // No usage to rewrite.
    b.add(chat("usage null", "{\"id\":\"a\",\"usage\":null}"));
    b.add(chat("no usage", "{\"id\":\"a\",\"choices\":[]}"));
    b.add(chat("empty object", "{}"));
    b.add(chat("usage a string", "{\"usage\":\"n/a\"}"));
    b.add(chat("usage an array", "{\"usage\":[]}"));
    b.add(chat("usage empty object", "{\"usage\":{}}"));
    b.add(chat("oversize usage", "{\"id\":\"a\",\"usage\":" + BIG_USAGE + "}"));
    // Counts the rule may not touch.
    b.add(chat("string count", "{\"usage\":{\"prompt_tokens\":\"10\",\"completion_tokens\":4}}"));
    b.add(chat("float count", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4.0}}"));
    b.add(chat("negative count", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":-4}}"));
    b.add(chat("details not an object", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":7}}"));
    // Layout and tokens.
    b.add(chat(
        "whitespace everywhere",
        " \r\n{ \"id\" : \"a\" ,\n\t\"model\"\t:\t\"m\" ,\r\n \"usage\" :\n { \"prompt_tokens\" : 20 , \"completion_tokens\" : 5 ,"
            + " \"total_tokens\" : 25 , \"prompt_tokens_details\" : { \"cached_tokens\" : 20 } } \r\n,\"z\" : [ ] \n} \r\n\t "));
    b.add(chat(
        "unicode",
        "{\"id\":\"é中😀\",\"model\":\"llama-\\u00e9\\ud83d\\ude00\\\"q\\\"\",\"choices\":[{\"text\":\"\\u0000\\b\\f\\n\\r\\t\\/\\\\ é 😀 \\ud800 \\udc00\"}],"
            + "\"clé\":{\"中\":[\"😀\"]},\"\\ud83d\\ude00\":1,\"usage\":" + USAGE + "}"));
    b.add(chat(
        "numbers of every form",
        "{\"a\":[0,-0,1,-1,0.5,-0.5,1e5,1E5,1e+5,1e-5,1.5E+10,-2.25e-300,123456789012345678901234567890,"
            + "0.000001,10000000000000000000000e-22],\"b\":" + "9".repeat(1000) + ",\"c\":true,\"d\":false,\"e\":null,"
            + "\"usage\":{\"prompt_tokens\":1e0,\"completion_tokens\":7,\"total_tokens\":-0}}"));
    b.add(chat("counts as -0 and big", "{\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":123456789012345678901234567890}}"));
    b.add(chat("deep nesting", "{\"deep\":" + "[".repeat(998) + "]".repeat(998) + ",\"usage\":" + USAGE + "}"));
    b.add(chat("models of every kind", "{\"model\":\"a\",\"response\":{\"model\":\"b\"},\"x\":{\"model\":\"c\"},\"model\":7,\"usage\":" + USAGE + "}"));
    b.add(raw("byte order mark", concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF}, ("{\"usage\":" + USAGE + "}").getBytes(StandardCharsets.UTF_8))));
    b.add(raw(
        "raw UTF-8 Jackson accepts in skipped strings",
        concat(
            "{\"c\":\"".getBytes(StandardCharsets.UTF_8),
            new byte[] {(byte) 0xC0, (byte) 0x80, (byte) 0xED, (byte) 0xA0, (byte) 0x80, (byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80},
            ("\",\"usage\":" + USAGE + "}").getBytes(StandardCharsets.UTF_8))));
    return b;
  }

  /** Malformed bodies: every one must come out byte-identical and count as parse_error. */
  static List<Body> malformed() {
    List<Body> b = new ArrayList<>();
    String doc = Wire.chatCompletion("g", USAGE);
    int usage = doc.indexOf(USAGE);
    // Before the usage object.
    b.add(chat("top-level array", "[" + doc + "]"));
    b.add(chat("top-level string", "\"usage\""));
    b.add(chat("empty", ""));
    b.add(chat("whitespace only", " \n"));
    b.add(chat("bad escape before usage", "{\"a\":\"\\x\",\"usage\":" + USAGE + "}"));
    b.add(chat("unterminated string before usage", "{\"a\":\"x,\"usage\":" + USAGE + "}"));
    b.add(chat("leading zero before usage", "{\"a\":01,\"usage\":" + USAGE + "}"));
    b.add(chat("trailing comma before usage", "{\"a\":[1,],\"usage\":" + USAGE + "}"));
    b.add(chat("single quotes", "{'usage':" + USAGE + "}"));
    b.add(raw("invalid UTF-8 before usage", concat(bytes("{\"a\":\""), new byte[] {(byte) 0xC3, '('}, bytes("\",\"usage\":" + USAGE + "}"))));
    b.add(raw("invalid UTF-8 outside strings", concat(bytes("{\"a\":1"), new byte[] {(byte) 0xC2, (byte) 0xA0}, bytes(",\"usage\":" + USAGE + "}"))));
    b.add(raw("UTF-8 surrogate in a name", concat(bytes("{\""), new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, bytes("\":1,\"usage\":" + USAGE + "}"))));
    b.add(chat("lone surrogate escape in a name", "{\"\\ud800\":1,\"usage\":" + USAGE + "}"));
    b.add(chat("name over 50000 bytes", "{\"" + "n".repeat(50001) + "\":1,\"usage\":" + USAGE + "}"));
    b.add(chat("nesting over 1000", "{\"a\":" + "[".repeat(1000) + "]".repeat(1000) + ",\"usage\":" + USAGE + "}"));
    // Inside the usage object.
    b.add(chat("leading zero in usage", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":04}}"));
    b.add(chat("unterminated usage", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4}"));
    b.add(chat("bad escape in usage", "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"x\":\"\\q\"}}"));
    b.add(raw("invalid UTF-8 in usage", concat(bytes("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"x\":\""), new byte[] {(byte) 0xFF}, bytes("\"}}"))));
    b.add(chat("oversize usage, malformed later", "{\"usage\":" + BIG_USAGE + ",\"x\":tru}"));
    // After the usage object.
    b.add(chat("extra closing brace", doc + "}"));
    b.add(chat("trailing garbage", doc + " x"));
    b.add(chat("second document", doc + " {}"));
    b.add(chat("trailing NUL", doc + "\u0000"));
    b.add(chat("bad literal after usage", "{\"usage\":" + USAGE + ",\"x\":tru}"));
    b.add(chat("bad escape after usage", "{\"usage\":" + USAGE + ",\"x\":\"\\x\"}"));
    b.add(chat("unterminated string after usage", "{\"usage\":" + USAGE + ",\"x\":\"abc}"));
    b.add(chat("missing comma after usage", "{\"usage\":" + USAGE + "\"x\":1}"));
    b.add(chat("number over 1000 digits after usage", "{\"usage\":" + USAGE + ",\"x\":" + "1".repeat(1001) + "}"));
    b.add(raw("invalid UTF-8 after usage", concat(bytes("{\"usage\":" + USAGE + ",\"x\":\""), new byte[] {(byte) 0xF8}, bytes("\"}"))));
    b.add(chat("duplicate usage, then malformed", "{\"usage\":" + USAGE_2 + ",\"usage\":" + USAGE + ",\"x\":[}"));
    // Truncations of a real body at every length (the whole body is well-formed).
    for (int cut = 0; cut < doc.length(); cut++) {
      if (!doc.substring(0, cut).isBlank() || cut == 0) {
        b.add(chat("truncated at " + cut + (cut > usage ? " (after usage start)" : ""), doc.substring(0, cut)));
      }
    }
    return b;
  }

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }
}
