package io.disaggusage.extproc.logging;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.LoggingEvent;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.config.Config;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

class JsonLineLayoutTest {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private final LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();

  private String layout(LoggingEvent event) {
    JsonLineLayout layout = new JsonLineLayout();
    layout.setContext(context);
    layout.start();
    return layout.doLayout(event);
  }

  @Test
  void oneObjectPerLineWithEveryField() throws Exception {
    Logger logger = context.getLogger("io.disaggusage.extproc.test.Json");
    RuntimeException failure =
        new IllegalStateException("outer \"failure\"", new java.io.IOException("inner\ncause"));
    LoggingEvent event =
        new LoggingEvent(
            Logger.class.getName(),
            logger,
            Level.WARN,
            "store {} failed\nsecond line \"quoted\" \u0007",
            failure,
            new Object[] {"redis"});
    event.setTimeStamp(1_764_400_000_123L);
    event.setThreadName("grpc-default-executor-3");
    event.setMDCPropertyMap(Map.of("zeta", "z", "alpha", "a\tb"));

    String line = layout(event);

    assertThat(line).endsWith(System.lineSeparator());
    assertThat(line.stripTrailing()).doesNotContain("\n", "\r");
    JsonNode json = MAPPER.readTree(line);
    assertThat(json.get("timestamp").asText()).isEqualTo("2025-11-29T07:06:40.123Z");
    assertThat(json.get("level").asText()).isEqualTo("WARN");
    assertThat(json.get("logger").asText()).isEqualTo("io.disaggusage.extproc.test.Json");
    assertThat(json.get("thread").asText()).isEqualTo("grpc-default-executor-3");
    assertThat(json.get("message").asText()).isEqualTo("store redis failed\nsecond line \"quoted\" \u0007");
    assertThat(json.get("mdc").properties())
        .extracting(Map.Entry::getKey)
        .containsExactly("alpha", "zeta");
    assertThat(json.get("mdc").get("alpha").asText()).isEqualTo("a\tb");
    String exception = json.get("exception").asText();
    assertThat(exception)
        .startsWith("java.lang.IllegalStateException: outer \"failure\"")
        .contains("\tat " + JsonLineLayoutTest.class.getName())
        .contains("Caused by: java.io.IOException: inner\ncause");
    assertThat(exception).doesNotEndWith("\n");
    assertThat(fieldNames(json)).containsExactly("timestamp", "level", "logger", "thread", "message", "mdc", "exception");
  }

  @Test
  void mdcAndExceptionAreLeftOutWhenAbsent() throws Exception {
    Logger logger = context.getLogger("plain");
    LoggingEvent event = new LoggingEvent(Logger.class.getName(), logger, Level.INFO, "hello ünï 池", null, null);

    JsonNode json = MAPPER.readTree(layout(event));

    assertThat(fieldNames(json)).containsExactly("timestamp", "level", "logger", "thread", "message");
    assertThat(json.get("message").asText()).isEqualTo("hello ünï 池");
  }

  @Test
  void switchingTheFormatReplacesTheStdoutEncoderAndBack() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    PrintStream stdout = System.out;
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    org.slf4j.Logger log = LoggerFactory.getLogger("io.disaggusage.extproc.test.Switch");
    Logger root = context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    try {
      Logging.useFormat(Config.LogFormat.JSON);
      Logging.useFormat(Config.LogFormat.JSON); // idempotent: still one line per event
      assertThat(root.getAppender(Logging.JSON_APPENDER)).isNotNull();
      assertThat(root.getAppender(Logging.TEXT_APPENDER)).isNull();
      log.info("as json {}", 1);
      Logging.useFormat(Config.LogFormat.TEXT);
      log.info("as text {}", 2);
    } finally {
      Logging.useFormat(Config.LogFormat.TEXT);
      System.setOut(stdout);
    }
    assertThat(root.getAppender(Logging.TEXT_APPENDER)).isNotNull();
    assertThat(root.getAppender(Logging.JSON_APPENDER)).isNull();

    List<String> lines = captured.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(lines).hasSize(2);
    JsonNode json = MAPPER.readTree(lines.get(0));
    assertThat(json.get("message").asText()).isEqualTo("as json 1");
    assertThat(json.get("logger").asText()).isEqualTo("io.disaggusage.extproc.test.Switch");
    assertThat(lines.get(1)).matches("\\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z INFO  \\[.*] .*Switch - as text 2");
  }

  private static List<String> fieldNames(JsonNode json) {
    return json.properties().stream().map(Map.Entry::getKey).toList();
  }
}
