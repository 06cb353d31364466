package io.disaggusage.extproc.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import java.util.List;
import java.util.Locale;
import java.util.logging.Handler;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.SimpleFormatter;
import org.slf4j.ILoggerFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Process-wide logging set-up: the root level ({@code --log-level}) and the bridge that sends
 * java.util.logging records (gRPC logs through JUL) to SLF4J/logback, so every log line has one format.
 */
public final class Logging {

  /** Accepted {@code --log-level} values. */
  public static final List<String> LEVELS = List.of("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF");

  private static volatile boolean bridged;

  private Logging() {}

  /**
   * Sets the root log level.
   *
   * @throws IllegalArgumentException when {@code level} is not one of {@link #LEVELS}
   */
  public static void setRootLevel(String level) {
    String name = level.trim().toUpperCase(Locale.ROOT);
    if (!LEVELS.contains(name)) {
      throw new IllegalArgumentException(
          "invalid log level \"" + level + "\"; expected one of " + String.join(", ", LEVELS).toLowerCase(Locale.ROOT));
    }
    ILoggerFactory factory = LoggerFactory.getILoggerFactory();
    if (factory instanceof LoggerContext context) {
      context.getLogger(Logger.ROOT_LOGGER_NAME).setLevel(Level.toLevel(name));
    }
    java.util.logging.Logger.getLogger("").setLevel(julLevel(name));
  }

  /**
   * Replaces java.util.logging's console output with a handler that forwards to SLF4J. Levels are then
   * decided by logback (gRPC and Netty are at WARN in logback.xml). Idempotent.
   */
  public static synchronized void bridgeJavaUtilLogging() {
    if (bridged) {
      return;
    }
    LogManager.getLogManager().reset();
    java.util.logging.Logger root = java.util.logging.Logger.getLogger("");
    root.setLevel(java.util.logging.Level.INFO);
    root.addHandler(new Slf4jHandler());
    bridged = true;
  }

  private static java.util.logging.Level julLevel(String level) {
    return switch (level) {
      case "TRACE" -> java.util.logging.Level.FINEST;
      case "DEBUG" -> java.util.logging.Level.FINE;
      case "INFO" -> java.util.logging.Level.INFO;
      case "WARN" -> java.util.logging.Level.WARNING;
      case "ERROR" -> java.util.logging.Level.SEVERE;
      default -> java.util.logging.Level.OFF;
    };
  }

  /** Forwards JUL records to the SLF4J logger of the same name. */
  private static final class Slf4jHandler extends Handler {
    private final SimpleFormatter formatter = new SimpleFormatter();

    @Override
    public void publish(LogRecord record) {
      if (record == null) {
        return;
      }
      String name = record.getLoggerName() == null ? "jul" : record.getLoggerName();
      Logger logger = LoggerFactory.getLogger(name);
      int level = record.getLevel().intValue();
      String message = formatter.formatMessage(record);
      Throwable thrown = record.getThrown();
      if (level >= java.util.logging.Level.SEVERE.intValue()) {
        if (logger.isErrorEnabled()) {
          logger.error(message, thrown);
        }
      } else if (level >= java.util.logging.Level.WARNING.intValue()) {
        if (logger.isWarnEnabled()) {
          logger.warn(message, thrown);
        }
      } else if (level >= java.util.logging.Level.INFO.intValue()) {
        if (logger.isInfoEnabled()) {
          logger.info(message, thrown);
        }
      } else if (level >= java.util.logging.Level.FINE.intValue()) {
        if (logger.isDebugEnabled()) {
          logger.debug(message, thrown);
        }
      } else if (logger.isTraceEnabled()) {
        logger.trace(message, thrown);
      }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  }
}
