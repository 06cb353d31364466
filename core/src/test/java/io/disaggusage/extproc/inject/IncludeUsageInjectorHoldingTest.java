package io.disaggusage.extproc.inject;

import static io.disaggusage.extproc.inject.InjectorRun.LEG;
import static io.disaggusage.extproc.testing.Text.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.Chunking;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the request rewrite holds and when: nothing without {@code stream_options} (unchanged chunks
 * go back as the very same arrays), the tail from {@code stream_options} on otherwise, within its cap;
 * the leg is asked only once the whole object is known; giving up returns every held byte.
 */
class IncludeUsageInjectorHoldingTest {

  static String prompt(int bytes) {
    return "{\"role\":\"user\",\"content\":\"" + "x".repeat(bytes) + "\"}";
  }

  @Test
  void aLargeBodyWithoutStreamOptionsIsNotHeldAndItsChunksAreNotCopied() {
    String body = "{\"model\":\"m\",\"messages\":[" + prompt(4 << 20) + "],\"stream\":true}";
    byte[] bytes = utf8(body);
    List<byte[]> chunks = Chunking.fixed(64 * 1024).split(bytes);
    IncludeUsageInjector injector = new IncludeUsageInjector(1024);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < chunks.size(); i++) {
      boolean last = i == chunks.size() - 1;
      byte[] reply = injector.accept(chunks.get(i), last, LEG);
      if (!last) {
        assertThat(reply).as("chunk %d", i).isSameAs(chunks.get(i));
      }
      out.writeBytes(reply);
    }
    assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(body.replace("true}", "true" + IncludeUsageInjectorTest.ADDED + "}"));
    assertThat(injector.outcome()).isEqualTo(InjectionOutcome.INJECTED);
  }

  @Test
  void fromStreamOptionsOnBytesAreHeldUntilTheRootCloses() {
    String head = "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":false},";
    String tail = "\"tools\":[" + prompt(10_000) + "]}";
    byte[] bytes = utf8(head + tail);
    List<byte[]> chunks = Chunking.fixed(1000).split(bytes);
    IncludeUsageInjector injector = new IncludeUsageInjector(1 << 20);
    int optionsAt = head.indexOf("{\"include_usage\"");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < chunks.size(); i++) {
      boolean last = i == chunks.size() - 1;
      byte[] reply = injector.accept(chunks.get(i), last, LEG);
      if (!last) {
        // Only what precedes the stream_options value has gone out.
        assertThat(out.size() + reply.length).isLessThanOrEqualTo(optionsAt);
      }
      out.writeBytes(reply);
    }
    assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo((head + tail).replace("false", "true"));
  }

  @Test
  void heldBytesAboveTheCapGoOutUnchanged() {
    String body = "{\"stream\":true,\"stream_options\":{\"include_usage\":false},\"tools\":[" + prompt(5000) + "]}";
    for (Chunking chunking : List.of(Chunking.whole(), Chunking.fixed(100), Chunking.bytewise())) {
      InjectorRun r = InjectorRun.of(utf8(body), LEG, chunking, 4096);
      assertThat(r.output()).isEqualTo(body);
      assertThat(r.outcome()).isEqualTo(InjectionOutcome.OVERSIZE);
      assertThat(r.injected()).isFalse();
    }
  }

  @Test
  void theLegIsAskedOnlyOnceTheWholeObjectHasBeenRead() {
    String body = "{\"stream\":true,\"stream_options\":{\"include_usage\":null},\"kv_transfer_params\":{\"do_remote_prefill\":true}} ";
    byte[] bytes = utf8(body);
    int close = body.lastIndexOf('}');
    IncludeUsageInjector injector = new IncludeUsageInjector(1 << 20);
    int[] fed = {0};
    int[] askedAt = {-1};
    IncludeUsageInjector.LegProbe probe = () -> {
      askedAt[0] = fed[0];
      return true;
    };
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < bytes.length; i++) {
      fed[0] = i + 1;
      out.writeBytes(injector.accept(new byte[] {bytes[i]}, i == bytes.length - 1, probe));
    }
    assertThat(askedAt[0]).isEqualTo(close + 1);
    assertThat(out.toString(StandardCharsets.UTF_8))
        .isEqualTo(body.replace("{\"include_usage\":null}", "{\"include_usage\":true}"));
  }

  @Test
  void stoppingWhileHoldingGivesBackTheHeldBytesAndPassesTheRest() {
    String first = "{\"stream\":true,\"stream_options\":{\"include_usage\":false},\"n\":";
    String second = "1}";
    IncludeUsageInjector injector = new IncludeUsageInjector(1 << 20);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(injector.accept(utf8(first), false, LEG));
    assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo("{\"stream\":true,\"stream_options\":");
    out.writeBytes(injector.stop());
    byte[] rest = utf8(second);
    assertThat(injector.accept(rest, true, LEG)).isSameAs(rest);
    out.writeBytes(rest);
    assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(first + second);
    assertThat(injector.outcome()).isEqualTo(InjectionOutcome.UNFINISHED);
    assertThat(injector.injected()).isFalse();
  }

  @Test
  void stoppingAfterTheRootClosedKeepsTheDecision() {
    IncludeUsageInjector injector = new IncludeUsageInjector(1 << 20);
    byte[] reply = injector.accept(utf8("{\"stream\":true}"), false, LEG);
    assertThat(new String(reply, StandardCharsets.UTF_8)).isEqualTo("{\"stream\":true" + IncludeUsageInjectorTest.ADDED + "}");
    assertThat(injector.stop()).isEmpty();
    assertThat(injector.injected()).isTrue();
    assertThat(injector.outcome()).isEqualTo(InjectionOutcome.INJECTED);
  }

  @Test
  void anEmptyFinalChunkCarriesNothingAndEndsTheBody() {
    IncludeUsageInjector injector = new IncludeUsageInjector(1 << 20);
    injector.accept(utf8("{\"stream\":true}"), false, LEG);
    assertThat(injector.outcome()).isNull();
    assertThat(injector.accept(new byte[0], true, LEG)).isEmpty();
    assertThat(injector.outcome()).isEqualTo(InjectionOutcome.INJECTED);
  }

  @Test
  void aFaultWhileDecidingLetsTheWholeBodyThroughUnchanged() {
    IncludeUsageInjector.LegProbe broken = () -> {
      throw new IllegalStateException("probe failed");
    };
    for (String body :
        List.of("{\"stream\":true}", "{\"stream\":true,\"stream_options\":{\"include_usage\":false},\"n\":1}")) {
      for (Chunking chunking : List.of(Chunking.whole(), Chunking.fixed(5), Chunking.bytewise())) {
        InjectorRun r = InjectorRun.of(utf8(body), broken, chunking, 1 << 20);
        assertThat(r.output()).isEqualTo(body);
        assertThat(r.outcome()).isEqualTo(InjectionOutcome.ERROR);
        assertThat(r.injected()).isFalse();
      }
    }
  }
}
