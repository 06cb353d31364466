package io.disaggusage.extproc.rewrite;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.inject.InjectedUsageEvents;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.JsonUsageRewriter;
import io.disaggusage.extproc.usage.UsageDocument;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Taking usage-only events out of a stream, as a context observer forwards it and as a generation
 * rewriter without context usage does (neither changes anything else): exactly those go, every other
 * byte stays, and the output is the same for every chunking (every split into two and three pieces,
 * one byte at a time, random).
 */
class UsageOnlyEventCasesTest {
  static final JsonFactory JSON = UsageDocument.newFactory(1 << 20);
  static final String ID = "\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"m\"";
  static final String USAGE = "{\"prompt_tokens\":1200,\"completion_tokens\":42,\"total_tokens\":1242,\"prompt_tokens_details\":{\"cached_tokens\":16}}";

  static String content(String text) {
    return "data: {" + ID + ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"},\"finish_reason\":null}]}\n\n";
  }

  static final String USAGE_EVENT = "data: {" + ID + ",\"choices\":[],\"usage\":" + USAGE + "}\n\n";
  static final String DONE = "data: [DONE]\n\n";

  record Case(String name, String in, String out, int removed) {
    @Override
    public String toString() {
      return name;
    }
  }

  static List<Case> cases() {
    String body = content("Par") + content("is");
    String chat = body + USAGE_EVENT + DONE;
    return List.of(
        new Case("vllm-chat", chat, body + DONE, 1),
        new Case("crlf", chat.replace("\n", "\r\n"), (body + DONE).replace("\n", "\r\n"), 1),
        new Case("cr-only", chat.replace("\n", "\r"), (body + DONE).replace("\n", "\r"), 1),
        new Case("trtllm-space-before-blank-line",
            "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]} \n\n"
                + "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[],\"usage\":" + USAGE + ",\"created\":1} \n\n" + DONE,
            "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]} \n\n" + DONE, 1),
        new Case("completions",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" Paris\"}]}\n\n"
                + "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":" + USAGE + "}\n\n" + DONE,
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" Paris\"}]}\n\n" + DONE, 1),
        new Case("no-space-and-multiline-data",
            body + "data:{" + ID + ",\n" + "data: \"choices\" : [ ],\n" + "data: \"usage\":" + USAGE + "}\n\n" + DONE, body + DONE, 1),
        new Case("usage-first-then-choices", body + "data: {\"usage\":" + USAGE + ",\"choices\":[]}\n\n" + DONE, body + DONE, 1),
        new Case("unterminated-last-event", body + "data: {\"choices\":[],\"usage\":" + USAGE + "}", body, 1),
        new Case("blank-lines-between-events", "\n\n" + content("a") + "\n\n" + USAGE_EVENT + "\n" + DONE,
            "\n\n" + content("a") + "\n\n" + "\n" + DONE, 1),
        // Kept: not a usage-only chunk.
        new Case("continuous-usage-on-content", content("x").replace("null}]}", "null}],\"usage\":" + USAGE + "}") + DONE,
            content("x").replace("null}]}", "null}],\"usage\":" + USAGE + "}") + DONE, 0),
        new Case("usage-null", "data: {\"choices\":[],\"usage\":null}\n\n", "data: {\"choices\":[],\"usage\":null}\n\n", 0),
        new Case("no-usage", "data: {\"choices\":[]}\n\n", "data: {\"choices\":[]}\n\n", 0),
        new Case("no-choices", "data: {\"usage\":" + USAGE + "}\n\n", "data: {\"usage\":" + USAGE + "}\n\n", 0),
        new Case("choices-text-in-content",
            content("\\\"choices\\\":[],\\\"usage\\\":{}"), content("\\\"choices\\\":[],\\\"usage\\\":{}"), 0),
        new Case("named-event", "event: usage\ndata: {\"choices\":[],\"usage\":" + USAGE + "}\n\n",
            "event: usage\ndata: {\"choices\":[],\"usage\":" + USAGE + "}\n\n", 0),
        new Case("comment-line", ": keep-alive\ndata: {\"choices\":[],\"usage\":" + USAGE + "}\n\n",
            ": keep-alive\ndata: {\"choices\":[],\"usage\":" + USAGE + "}\n\n", 0),
        new Case("responses-api", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{}}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{}}}\n\n", 0),
        new Case("not-json", "data: {\"choices\":[],\"usage\":{}\n\n", "data: {\"choices\":[],\"usage\":{}\n\n", 0),
        new Case("two-choices-one-not-empty", "data: {\"choices\":[],\"choices\":[1],\"usage\":{}}\n\n",
            "data: {\"choices\":[],\"choices\":[1],\"usage\":{}}\n\n", 0),
        new Case("done-only", DONE, DONE, 0),
        new Case("empty", "", "", 0));
  }

  static String run(String in, Chunking chunking, int maxEvent, int[] removed) {
    String context = run(in, chunking, removed, results -> new ContextSseObserver(JSON, maxEvent, results));
    int contextRemoved = removed[0];
    String generation = run(in, chunking, removed, results -> {
      var rewriter = new GenerationSseRewriter(
          new JsonUsageRewriter(JSON, 65536), JSON, ApiShapes.CHAT, maxEvent, 1 << 20, results);
      rewriter.resolveContext(null, Outcome.PASSTHROUGH_NO_CONTEXT);
      return rewriter;
    });
    assertThat(generation).as("generation leg").isEqualTo(context);
    assertThat(removed[0]).as("generation leg").isEqualTo(contextRemoved);
    return context;
  }

  private static String run(
      String in, Chunking chunking, int[] removed, Function<InjectedUsageEvents, ResponseBodyProcessor> processor) {
    List<UsageRemoval> results = new ArrayList<>();
    ResponseBodyProcessor p = processor.apply(new InjectedUsageEvents(JSON, results::add));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] chunk : chunking.split(in.getBytes(StandardCharsets.UTF_8))) {
      p.accept(chunk);
      out.writeBytes(p.takeReady());
    }
    p.finish();
    out.writeBytes(p.takeReady());
    assertThat(results).hasSize(1);
    removed[0] = results.get(0) == UsageRemoval.REMOVED ? 1 : 0;
    return out.toString(StandardCharsets.UTF_8);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void everySplitGivesTheExpectedBytes(Case c) {
    int[] removed = {0};
    assertThat(run(c.in(), Chunking.whole(), 1 << 16, removed)).isEqualTo(c.out());
    assertThat(removed[0]).isEqualTo(c.removed());
    assertThat(run(c.in(), Chunking.bytewise(), 1 << 16, removed)).isEqualTo(c.out());
    int length = c.in().getBytes(StandardCharsets.UTF_8).length;
    for (int i = 0; i <= length; i++) {
      for (int j = i; j <= length; j += 5) {
        assertThat(run(c.in(), Chunking.at(i, j), 1 << 16, removed)).as("splits %d,%d", i, j).isEqualTo(c.out());
        assertThat(removed[0]).isEqualTo(c.removed());
      }
    }
    Random rnd = new Random(c.name().hashCode());
    for (int n = 0; n < 50; n++) {
      assertThat(run(c.in(), Chunking.random(rnd.nextLong(), 1 + rnd.nextInt(40)), 1 << 16, removed)).isEqualTo(c.out());
    }
  }
}
