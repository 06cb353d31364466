package io.disaggusage.extproc.logging;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.LoggerContext;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

class LoggingTest {

  /** Lettuce's encoder at TRACE writes each command's bytes: the AUTH of every connection, password and all. */
  @Test
  void atTraceLevelLettucesCommandBytesStayOutOfTheLogAndTheRestFollowsTheLevel() {
    LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
    String before = context.getLogger(Logger.ROOT_LOGGER_NAME).getLevel().toString();
    Logging.setRootLevel("trace");
    try {
      Logger encoder = LoggerFactory.getLogger("io.lettuce.core.protocol.CommandEncoder");
      assertThat(encoder.isTraceEnabled()).as("the encoder's bytes").isFalse();
      assertThat(encoder.isDebugEnabled()).as("the encoder's per-command line").isFalse();
      assertThat(encoder.isErrorEnabled()).as("an encoding error").isTrue();
      assertThat(LoggerFactory.getLogger("io.lettuce.core.RedisClient").isTraceEnabled()).as("the rest of Lettuce").isTrue();
    } finally {
      Logging.setRootLevel(before);
    }
  }
}
