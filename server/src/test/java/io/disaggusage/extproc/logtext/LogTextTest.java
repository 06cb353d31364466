package io.disaggusage.extproc.logtext;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class LogTextTest {

  @Test
  void shortPrintableTextIsKeptAsIs() {
    assertThat(LogText.bounded("req-42/abc:9")).isEqualTo("req-42/abc:9");
    assertThat(LogText.bounded("meta-llama/Llama-3.1-8B-Instruct")).isEqualTo("meta-llama/Llama-3.1-8B-Instruct");
    assertThat(LogText.bounded("ünïcödé-池")).isEqualTo("ünïcödé-池");
    assertThat(LogText.bounded(null)).isEqualTo("-");
  }

  @Test
  void controlFormatAndWhitespaceCharactersCannotForgeOrSplitALine() {
    assertThat(LogText.bounded("id\r\n2026-01-01 ERROR forged")).isEqualTo("id??2026-01-01?ERROR?forged");
    assertThat(LogText.bounded("a\tb\u0000c\u001b[31md")).isEqualTo("a?b?c?[31md");
    assertThat(LogText.bounded("x\u2028y\u2029z\u0085w")).isEqualTo("x?y?z?w");
    assertThat(LogText.bounded("rtl\u202eevil\u200b\u00a0")).isEqualTo("rtl?evil??");
  }

  @Test
  void longTextIsCutToTheMaximumWithAnEllipsis() {
    String longKey = "k".repeat(1000);
    String bounded = LogText.bounded(longKey);
    assertThat(bounded).hasSize(LogText.MAX).endsWith("...").startsWith("kkkk");
    assertThat(LogText.bounded("k".repeat(LogText.MAX))).isEqualTo("k".repeat(LogText.MAX));
    assertThat(LogText.bounded("abcdefghij", 8)).isEqualTo("abcde...");
  }

  @Test
  void aSurrogatePairIsNeverSplit() {
    String text = "abcd\uD83D\uDE00wxyz"; // abcd😀wxyz
    assertThat(LogText.bounded(text, 8)).isEqualTo("abcd...");
    assertThat(LogText.bounded(text, 9)).isEqualTo("abcd\uD83D\uDE00...");
  }

  @Test
  void credentialsInUrisAreReplacedAndEverythingElseKept() {
    assertThat(LogText.withoutCredentials("redis://:s3cret@redis:6379/0")).isEqualTo("redis://***@redis:6379/0");
    assertThat(LogText.withoutCredentials("invalid Redis URI rediss://user:pw@h: bad port"))
        .isEqualTo("invalid Redis URI rediss://***@h: bad port");
    assertThat(LogText.withoutCredentials("http://otel-collector:4318")).isEqualTo("http://otel-collector:4318");
    assertThat(LogText.withoutCredentials("HTTPS://a:b@c/x")).isEqualTo("HTTPS://***@c/x");
  }
}
