package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Property (seeded random generation, seed printed): for random chat, completions, Responses and
 * Anthropic Messages bodies, the legs of one flow as each router or engine transforms them always
 * have the client body's fingerprint, and bodies with a different prompt or model never do.
 */
class PromptFingerprintFlowPropertyTest {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final ObjectMapper SORTED =
      new ObjectMapper().configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true);

  @Test
  void legsOfOneFlowMatchAndOtherPromptsNever() throws Exception {
    long seed = System.nanoTime();
    System.out.println("PromptFingerprintFlowPropertyTest seed " + seed);
    Random random = new Random(seed);
    for (int run = 0; run < 300; run++) {
      ObjectNode client = clientBody(random);
      PromptFingerprint expected = fingerprint(client);
      assertThat(expected).as("seed %d run %d %s", seed, run, client).isNotNull();
      for (ObjectNode leg : legs(client, random)) {
        assertThat(fingerprint(leg)).as("seed %d run %d leg %s", seed, run, leg).isEqualTo(expected);
        assertThat(PromptFingerprintTest.msgpack(MsgpackBodies.fromJson(MAPPER.writeValueAsString(leg), Style.values()[run % 3])))
            .as("seed %d run %d msgpack leg %s", seed, run, leg).isEqualTo(expected);
      }
      assertThat(fingerprint(sorted(client))).isEqualTo(expected); // pd-sidecar: sorted keys
      ObjectNode otherModel = client.deepCopy().put("model", client.get("model").asText() + "x");
      assertThat(fingerprint(otherModel)).as("seed %d run %d", seed, run).isNotEqualTo(expected);
      ObjectNode otherPrompt = client.deepCopy();
      mutatePrompt(otherPrompt, random);
      assertThat(fingerprint(otherPrompt)).as("seed %d run %d %s", seed, run, otherPrompt).isNotEqualTo(expected);
    }
  }

  /** Each router's or engine's legs for one client body. */
  private static List<ObjectNode> legs(ObjectNode client, Random random) {
    List<ObjectNode> legs = new ArrayList<>();
    ObjectNode vllmPrefill = client.deepCopy(); // vllm-router's prefill leg
    vllmPrefill.put("max_tokens", 1).put("stream", false).put("min_tokens", 0).put("ignore_eos", false)
        .put("include_reasoning", false).put("skip_special_tokens", true).remove("stream_options");
    vllmPrefill.putObject("kv_transfer_params").put("do_remote_decode", true).put("do_remote_prefill", false);
    legs.add(vllmPrefill);
    ObjectNode vllmDecode = client.deepCopy();
    vllmDecode.putObject("kv_transfer_params").put("do_remote_prefill", true).put("remote_engine_id", "e");
    legs.add(vllmDecode);
    ObjectNode sglang = client.deepCopy(); // sglang-router: both legs the same
    if (sglang.has("max_tokens")) {
      sglang.set("max_completion_tokens", sglang.remove("max_tokens"));
    }
    sglang.put("bootstrap_host", "10.0.0.1").put("bootstrap_port", 8998).put("bootstrap_room", random.nextLong())
        .put("logprobs", false).put("no_stop_trim", false).put("separate_reasoning", true);
    legs.add(sglang);
    ObjectNode sidecarPrefill = client.deepCopy(); // pd-sidecar, re-serialised with sorted keys
    sidecarPrefill.put("max_tokens", 1).put("max_completion_tokens", 1).put("stream", false).remove("stream_options");
    sidecarPrefill.putObject("kv_transfer_params").put("do_remote_decode", true).putNull("remote_host");
    legs.add(sorted(sidecarPrefill));
    ObjectNode trtCtx = client.deepCopy(); // TensorRT-LLM chat / Responses / Messages legs
    if (!trtCtx.has("prompt")) {
      trtCtx.put("stream", false).putObject("disaggregated_params").put("request_type", "context_only")
          .put("disagg_request_id", 2748779069441234567L).put("schedule_style", 0);
      legs.add(trtCtx);
      ObjectNode trtGen = client.deepCopy();
      ArrayNode ids = trtGen.putArray("prompt_token_ids");
      random.ints(5, 0, 50000).forEach(ids::add);
      trtGen.putObject("disaggregated_params").put("request_type", "generation_only")
          .put("ctx_request_id", 2748779069441234567L).put("encoded_opaque_state", "abc");
      legs.add(trtGen);
    }
    return legs;
  }

  private static ObjectNode clientBody(Random random) {
    ObjectNode body = MAPPER.createObjectNode();
    body.put("model", "model-" + random.nextInt(3));
    switch (random.nextInt(4)) {
      case 0 -> body.set("messages", messages(random));
      case 1 -> {
        if (random.nextBoolean()) {
          body.put("prompt", text(random));
        } else {
          ArrayNode ids = body.putArray("prompt");
          random.ints(1 + random.nextInt(20), 0, 1 << 17).forEach(ids::add);
        }
      }
      case 2 -> {
        body.set("input", random.nextBoolean() ? MAPPER.getNodeFactory().textNode(text(random)) : messages(random));
        if (random.nextBoolean()) {
          body.put("instructions", text(random));
        }
      }
      default -> {
        body.put("system", text(random));
        body.set("messages", messages(random));
      }
    }
    body.put("max_tokens", 1 + random.nextInt(500)).put("temperature", random.nextInt(10) / 10.0);
    if (random.nextBoolean()) {
      body.put("stream", true).putObject("stream_options").put("include_usage", true);
    }
    return body;
  }

  private static ArrayNode messages(Random random) {
    ArrayNode messages = MAPPER.createArrayNode();
    for (int i = 0, n = 1 + random.nextInt(4); i < n; i++) {
      ObjectNode m = messages.addObject().put("role", i % 2 == 0 ? "user" : "assistant");
      if (random.nextBoolean()) {
        m.put("content", text(random));
      } else {
        m.putArray("content").addObject().put("type", "text").put("text", text(random));
      }
    }
    return messages;
  }

  private static String text(Random random) {
    String alphabet = "ab c\"\\/\n\té€😀<&>\u0000";
    StringBuilder s = new StringBuilder();
    for (int i = 0, n = 1 + random.nextInt(30); i < n; i++) {
      int cp = alphabet.codePointAt(alphabet.offsetByCodePoints(0, random.nextInt(alphabet.codePointCount(0, alphabet.length()))));
      s.appendCodePoint(cp);
    }
    return s.toString();
  }

  /** A different prompt: one more character or element somewhere in the prompt-bearing member. */
  private static void mutatePrompt(ObjectNode body, Random random) {
    String member = body.has("prompt") ? "prompt" : body.has("input") ? "input" : "messages";
    JsonNode value = body.get(member);
    if (value.isTextual()) {
      body.put(member, value.asText() + "x");
    } else if (value.isArray() && value.get(0).isNumber()) {
      ((ArrayNode) value).add(random.nextInt(100));
    } else {
      ((ArrayNode) value).addObject().put("role", "user").put("content", "more");
    }
  }

  private static ObjectNode sorted(ObjectNode body) {
    try {
      return (ObjectNode) MAPPER.readTree(SORTED.writeValueAsString(SORTED.treeToValue(body, Object.class)));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static PromptFingerprint fingerprint(ObjectNode body) throws Exception {
    byte[] json = MAPPER.writeValueAsBytes(body);
    return PromptFingerprintTest.json(json);
  }
}
