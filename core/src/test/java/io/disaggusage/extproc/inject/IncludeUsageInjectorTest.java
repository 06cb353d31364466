package io.disaggusage.extproc.inject;

import static io.disaggusage.extproc.inject.InjectorRun.LEG;
import static io.disaggusage.extproc.inject.InjectorRun.OTHER;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.inject.IncludeUsageInjector.LegProbe;
import io.disaggusage.extproc.driver.Chunking;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The request rewrite on realistic and edge-case bodies, each under every split into two and three
 * chunks (and one byte at a time): the output is exact, and the same for every chunking.
 */
class IncludeUsageInjectorTest {
  static final String MSGS = "\"messages\":[{\"role\":\"user\",\"content\":\"capital of France?\"}]";
  static final String ADDED = ",\"stream_options\":{\"include_usage\":true}";

  record Case(String name, String in, LegProbe probe, String out, InjectionOutcome outcome) {
    @Override
    public String toString() {
      return name;
    }
  }

  static Case c(String name, String in, String out, InjectionOutcome outcome) {
    return new Case(name, in, LEG, out, outcome);
  }

  /** A body that must come out byte-identical. */
  static Case same(String name, String in, InjectionOutcome outcome) {
    return new Case(name, in, LEG, in, outcome);
  }

  static Case c(String name, LegProbe probe, String in, String out, InjectionOutcome outcome) {
    return new Case(name, in, probe, out, outcome);
  }

  /** Bodies that are not valid JSON objects, up to their closing brace at least: byte-identical out. */
  static final List<String> MALFORMED = List.of(
      "{\"stream\":true,}",
      "{\"stream\":tru}",
      "[{\"stream\":true}]",
      "\"stream\"",
      "12",
      "{\"stream\":true",
      "{\"stream\":true,\"stream_options\":{\"include_usage\":fal",
      "{\"n\":01,\"stream\":true}",
      "{\"c\":\"a\tb\",\"stream\":true}",
      "{\"c\":\"\\x\",\"stream\":true}",
      "{\"temperature\":NaN,\"stream\":true}",
      "{\"stream_options\":{\"include_usage\":false},\"stream\":true,]",
      "",
      "  \n");

  static List<Case> cases() {
    List<Case> all = new java.util.ArrayList<>(wellFormed());
    MALFORMED.forEach(body -> all.add(same("malformed " + body.replace("\n", "\\n"), body, InjectionOutcome.MALFORMED)));
    return all;
  }

  static List<Case> wellFormed() {
    String stream = "{\"model\":\"m\"," + MSGS + ",\"stream\":true}";
    String sglang = ",\"bootstrap_host\":\"10.0.0.1\",\"bootstrap_port\":8998,\"bootstrap_room\":9223372036854775807";
    return List.of(
        // No stream_options: one member added before the closing brace.
        c("no-options", stream, stream.replace("true}", "true" + ADDED + "}"), InjectionOutcome.INJECTED),
        c("stream-first", "{\"stream\":true,\"model\":\"m\"," + MSGS + "}",
            "{\"stream\":true,\"model\":\"m\"," + MSGS + ADDED + "}", InjectionOutcome.INJECTED),
        c("whitespace", "{ \"stream\" : true ,\n  \"model\" : \"m\"\n}\n",
            "{ \"stream\" : true ,\n  \"model\" : \"m\"\n" + ADDED + "}\n", InjectionOutcome.INJECTED),
        c("crlf-tabs", "{\r\n\t\"model\":\t\"m\",\r\n\t\"stream\":\ttrue\r\n}",
            "{\r\n\t\"model\":\t\"m\",\r\n\t\"stream\":\ttrue\r\n" + ADDED + "}", InjectionOutcome.INJECTED),
        c("only-stream", "{\"stream\":true}", "{\"stream\":true" + ADDED + "}", InjectionOutcome.INJECTED),
        c("vllm-marker-at-end",
            "{\"model\":\"m\",\"stream\":true,\"kv_transfer_params\":{\"do_remote_prefill\":true}}",
            "{\"model\":\"m\",\"stream\":true,\"kv_transfer_params\":{\"do_remote_prefill\":true}" + ADDED + "}",
            InjectionOutcome.INJECTED),
        // Look-alikes that must not match.
        c("options-text-in-a-string",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"\\\"stream_options\\\":{\\\"include_usage\\\":false}\"}],\"stream\":true}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"\\\"stream_options\\\":{\\\"include_usage\\\":false}\"}],\"stream\":true" + ADDED + "}",
            InjectionOutcome.INJECTED),
        c("nested-options-object",
            "{\"metadata\":{\"stream_options\":{\"include_usage\":true}},\"stream\":true}",
            "{\"metadata\":{\"stream_options\":{\"include_usage\":true}},\"stream\":true" + ADDED + "}",
            InjectionOutcome.INJECTED),
        same("nested-stream-key", "{\"tools\":[{\"stream\":true}],\"extra\":{\"stream\":true}}",
            InjectionOutcome.NOT_STREAMING),
        c("escapes-and-unicode",
            "{\"content\":\"a\\\\\\\"} \\u00e9 \\ud83d\\ude00 é 😀\",\"stream\":true}",
            "{\"content\":\"a\\\\\\\"} \\u00e9 \\ud83d\\ude00 é 😀\",\"stream\":true" + ADDED + "}",
            InjectionOutcome.INJECTED),
        c("escaped-key-is-the-key", "{\"stream\":true,\"stream\\u005foptions\":{\"include_usage\":false}}",
            "{\"stream\":true,\"stream\\u005foptions\":{\"include_usage\":true}}", InjectionOutcome.INJECTED),
        // An existing stream_options object.
        c("include-false", "{\"stream\":true,\"stream_options\":{\"include_usage\":false}," + MSGS + "}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true}," + MSGS + "}", InjectionOutcome.INJECTED),
        c("include-false-spaced", "{\"stream\":true,\"stream_options\": { \"include_usage\" : false } }",
            "{\"stream\":true,\"stream_options\": { \"include_usage\" : true } }", InjectionOutcome.INJECTED),
        c("include-null-then-stream", "{\"stream_options\":{\"include_usage\":null,\"x\":[1]},\"stream\":true}",
            "{\"stream_options\":{\"include_usage\":true,\"x\":[1]},\"stream\":true}", InjectionOutcome.INJECTED),
        c("options-null", "{\"stream\":true,\"stream_options\":null}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}", InjectionOutcome.INJECTED),
        same("include-true", "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            InjectionOutcome.CLIENT_ASKED),
        same("continuous", "{\"stream\":true,\"stream_options\":{\"continuous_usage_stats\":true}}",
            InjectionOutcome.CONTINUOUS_USAGE),
        same("empty-options-vllm", "{\"stream\":true,\"stream_options\":{}}",
            InjectionOutcome.ENGINE_DEFAULT),
        c("empty-options-sglang", "{\"stream\":true,\"stream_options\":{}" + sglang + "}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true}" + sglang + "}", InjectionOutcome.INJECTED),
        c("options-with-member-sglang",
            "{\"stream_options\":{\"continuous_usage_stats\":false},\"stream\":true" + sglang + "}",
            "{\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":false},\"stream\":true" + sglang + "}",
            InjectionOutcome.INJECTED),
        same("include-not-boolean", "{\"stream\":true,\"stream_options\":{\"include_usage\":\"yes\"}}",
            InjectionOutcome.MALFORMED),
        same("options-not-object", "{\"stream\":true,\"stream_options\":[]}",
            InjectionOutcome.MALFORMED),
        same("options-twice", "{\"stream\":true,\"stream_options\":{\"include_usage\":false},\"stream_options\":{}}",
            InjectionOutcome.AMBIGUOUS),
        // Nothing to do.
        same("not-streaming", "{\"model\":\"m\",\"stream\":false}", InjectionOutcome.NOT_STREAMING),
        same("stream-absent", "{\"model\":\"m\"}", InjectionOutcome.NOT_STREAMING),
        same("stream-not-boolean", "{\"stream\":\"true\"}", InjectionOutcome.NOT_STREAMING),
        c("not-a-leg", OTHER, stream, stream, InjectionOutcome.OTHER_LEG),
        c("not-a-leg-at-end", OTHER, "{\"stream\":true,\"stream_options\":{\"include_usage\":false}}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":false}}", InjectionOutcome.OTHER_LEG),
        // Decided at the closing brace: later garbage is seen only afterwards (the worker rejects it anyway).
        c("garbage-after-root", "{\"stream\":true} x", "{\"stream\":true" + ADDED + "} x", InjectionOutcome.MALFORMED));
  }

  static List<Arguments> casesAndChunkings() {
    return cases().stream().map(Arguments::of).toList();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("casesAndChunkings")
  void everySplitGivesTheExpectedBytes(Case c) {
    byte[] in = c.in().getBytes(StandardCharsets.UTF_8);
    InjectorRun whole = InjectorRun.of(c.in(), c.probe(), Chunking.whole());
    assertThat(whole.output()).isEqualTo(c.out());
    assertThat(whole.outcome()).isEqualTo(c.outcome());
    assertThat(whole.injected()).isEqualTo(!c.in().equals(c.out()));
    assertThat(InjectorRun.of(c.in(), c.probe(), Chunking.bytewise()).output()).isEqualTo(c.out());
    for (int i = 0; i <= in.length; i++) {
      for (int j = i; j <= in.length; j++) {
        InjectorRun r = InjectorRun.of(c.in(), c.probe(), Chunking.at(i, j));
        assertThat(r.output()).as("splits %d,%d", i, j).isEqualTo(c.out());
        assertThat(r.outcome()).as("splits %d,%d", i, j).isEqualTo(c.outcome());
      }
    }
  }
}
