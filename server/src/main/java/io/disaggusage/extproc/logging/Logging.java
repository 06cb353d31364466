package io.disaggusage.extproc.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.LayoutWrappingEncoder;
import io.disaggusage.extproc.config.Config;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
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
 * Process-wide logging set-up: the line format ({@code logging.format}), the root level ({@code
 * logging.level}, {@code --log-level}) and the bridge that sends java.util.logging records (gRPC logs
 * through JUL) to SLF4J/logback, so every log line has one format.
 *
 * <p>logback.xml defines the text appender {@value #TEXT_APPENDER}. The JSON format adds a console
 * appender {@value #JSON_APPENDER} with {@link JsonLineLayout} to the root logger and then detaches the
 * text one, so no event is lost or written twice while switching.
 */
public final class Logging {

  /** Accepted {@code --log-level} values. */
  public static final List<String> LEVELS = List.of("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF");

  /** The stdout appender of logback.xml: one text line per event. */
  public static final String TEXT_APPENDER = "STDOUT";

  /** The stdout appender {@link #useFormat} adds for {@code logging.format: json}. */
  public static final String JSON_APPENDER = "STDOUT_JSON";

  private static volatile boolean bridged;
  /** The text appender while JSON is in use, so {@link #useFormat} can switch back. */
  private static Appender<ILoggingEvent> detachedText;
  /** Where the console appenders write: logback's {@code System.out} unless {@link #useStandardError} said otherwise. */
  private static String consoleTarget = "System.out";

  private Logging() {}

  /**
   * Applies the {@code logging.*} configuration: bridges java.util.logging, selects the line format and
   * sets the root level. Call once the configuration is loaded, before the server starts.
   */
  public static void configure(Config.Logging logging) {
    bridgeJavaUtilLogging();
    useFormat(logging.format());
    setRootLevel(logging.level().name());
  }

  /**
   * Writes stdout log lines as text (logback.xml's pattern) or as JSON objects ({@link JsonLineLayout}).
   * Idempotent; does nothing when logback is not the SLF4J backend.
   */
  public static synchronized void useFormat(Config.LogFormat format) {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext context)) {
      return;
    }
    ch.qos.logback.classic.Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
    if (format == Config.LogFormat.JSON) {
      if (root.getAppender(JSON_APPENDER) == null) {
        root.addAppender(jsonAppender(context));
      }
      Appender<ILoggingEvent> text = root.getAppender(TEXT_APPENDER);
      if (text != null) {
        root.detachAppender(text);
        detachedText = text;
      }
    } else {
      if (root.getAppender(TEXT_APPENDER) == null && detachedText != null) {
        root.addAppender(detachedText);
      }
      detachedText = null;
      Appender<ILoggingEvent> json = root.getAppender(JSON_APPENDER);
      if (json != null) {
        root.detachAppender(json);
        json.stop();
      }
    }
  }

  /**
   * Sends the log lines to stderr ({@code true}) or back to stdout ({@code false}): for commands whose
   * stdout is their result ({@code demo}, {@code replay}). Applies to the appenders in use and to the
   * JSON one if {@link #useFormat} adds it later.
   */
  public static synchronized void useStandardError(boolean stderr) {
    consoleTarget = stderr ? "System.err" : "System.out";
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext context)) {
      return;
    }
    ch.qos.logback.classic.Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
    for (Appender<ILoggingEvent> appender :
        Arrays.asList(root.getAppender(TEXT_APPENDER), root.getAppender(JSON_APPENDER), detachedText)) {
      if (appender instanceof ConsoleAppender<ILoggingEvent> console && !consoleTarget.equals(console.getTarget())) {
        console.stop();
        console.setTarget(consoleTarget);
        console.start();
      }
    }
  }

  private static Appender<ILoggingEvent> jsonAppender(LoggerContext context) {
    JsonLineLayout layout = new JsonLineLayout();
    layout.setContext(context);
    layout.start();
    LayoutWrappingEncoder<ILoggingEvent> encoder = new LayoutWrappingEncoder<>();
    encoder.setContext(context);
    encoder.setCharset(StandardCharsets.UTF_8);
    encoder.setLayout(layout);
    encoder.start();
    ConsoleAppender<ILoggingEvent> appender = new ConsoleAppender<>();
    appender.setContext(context);
    appender.setName(JSON_APPENDER);
    appender.setTarget(consoleTarget);
    appender.setEncoder(encoder);
    appender.start();
    return appender;
  }

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
