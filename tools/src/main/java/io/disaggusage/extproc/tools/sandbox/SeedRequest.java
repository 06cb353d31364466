package io.disaggusage.extproc.tools.sandbox;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.tools.demo.DemoRun;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.WordTokenizer;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import java.net.URI;
import java.util.List;

/**
 * The chat completions the sandbox sends and prints. Both share a long system prompt, as the requests
 * of one application do: the start-up request (a question of its own) puts that prompt in the context
 * workers' prefix caches, so the printed request's first call finds its system prompt cached but not
 * its question, and a repeat finds all of it. The numbers the client should read follow from the
 * simulation's tokenizer and cache ({@link #expected()}).
 */
final class SeedRequest {
  static final String MODEL = DemoRun.MODEL;

  private static final String SYSTEM_PROMPT =
      "You are the support assistant of an LLM platform that serves models with prefill/decode disaggregation:"
          + " a prefill worker computes the KV cache of the prompt and hands it over to a decode worker, which"
          + " generates the answer. Cached prompt tokens are billed at a tenth of the price, so answer questions"
          + " about token usage precisely.";
  /** The printed request's question. */
  static final String QUESTION =
      "Our invoices say that almost every prompt token was cached, even for prompts that no worker had ever"
          + " seen before. Why would the decode worker count the whole prompt as cached tokens?";
  /** The start-up request's question: shares the system prompt only. */
  static final String STARTUP_QUESTION = "Which worker computes the KV cache of a prompt?";
  /**
   * The warm-up requests' whole prompt: shorter than a cache block, so no cache keeps any of it and
   * the numbers above stay as they are.
   */
  private static final String WARM_UP_PROMPT = "Warm-up.";
  /** Tokens a warm-up asks for: a short stream (the workers pause between events) with every kind of event. */
  private static final int WARM_UP_MAX_TOKENS = 2;

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The usage the printed request should get.
   *
   * @param prompt its prompt tokens
   * @param firstCached the context worker's cache hits on its first call (the system prompt's blocks)
   * @param repeatCached the hits once it has been sent (every full block but the one with the last token)
   */
  record Expected(long prompt, long firstCached, long repeatCached) {}

  private SeedRequest() {}

  /** A client's chat completion body with the shared system prompt and {@code question}, compact JSON. */
  static String json(String question, boolean stream) {
    return body(messages(question), stream).toString();
  }

  /** A short chat completion whose prompt leaves nothing in a prefix cache. */
  static String warmUpJson(boolean stream) {
    ObjectNode body = body(List.of(new Message("user", WARM_UP_PROMPT)), stream);
    body.put("max_tokens", WARM_UP_MAX_TOKENS);
    return body.toString();
  }

  private static ObjectNode body(List<Message> prompt, boolean stream) {
    ObjectNode body = JSON.createObjectNode();
    body.put("model", MODEL);
    var messages = body.putArray("messages");
    for (Message message : prompt) {
      messages.addObject().put("role", message.role()).put("content", message.content());
    }
    if (stream) {
      body.put("stream", true);
    }
    return body;
  }

  /** A curl command line that POSTs {@code json} to the chat completions path of {@code base}. */
  static String curl(URI base, String json) {
    return "curl -sS " + base.resolve(LoopbackHttp.CHAT_COMPLETIONS) + " -H 'content-type: application/json' -d "
        + shellQuoted(json);
  }

  /** What the simulation's tokenizer and a prefix cache like the context workers' make of the two requests. */
  static Expected expected() {
    WordTokenizer tokenizer = new WordTokenizer();
    int[] seed = tokenizer.encodeChat(messages(QUESTION));
    PrefixCache cache = new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, 64);
    cache.prefill(tokenizer.encodeChat(messages(STARTUP_QUESTION)));
    int first = cache.prefill(seed);
    int repeat = cache.prefill(seed);
    return new Expected(seed.length, first, repeat);
  }

  private static List<Message> messages(String question) {
    return List.of(new Message("system", SYSTEM_PROMPT), new Message("user", question));
  }

  /** One POSIX shell word: single quotes, each single quote inside written as {@code '\''}. */
  static String shellQuoted(String text) {
    return "'" + text.replace("'", "'\\''") + "'";
  }
}
