package io.disaggusage.extproc.logging;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.CoreConstants;
import ch.qos.logback.core.LayoutBase;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code logging.format: json}: one JSON object per line,
 *
 * <pre>{@code
 * {"timestamp":"2025-06-01T12:00:00.123Z","level":"INFO","logger":"io.disaggusage.extproc.runtime.ServerRuntime",
 *  "thread":"main","message":"disagg-usage-extproc 0.1.0 started in 512 ms ...","mdc":{"k":"v"},
 *  "exception":"java.lang.IllegalStateException: ...\n\tat ..."}
 * }</pre>
 *
 * <p>(shown wrapped; the real line has no line break). {@code mdc} appears when the event has MDC
 * entries (sorted by key), {@code exception} when it carries a throwable: the whole stack trace as one
 * string, so a collector never splits an event.
 */
public final class JsonLineLayout extends LayoutBase<ILoggingEvent> {
  private static final JsonFactory JSON = new JsonFactory();
  private static final DateTimeFormatter TIMESTAMP =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  @Override
  public String doLayout(ILoggingEvent event) {
    StringWriter line = new StringWriter(256);
    try (JsonGenerator json = JSON.createGenerator(line)) {
      json.writeStartObject();
      json.writeStringField("timestamp", TIMESTAMP.format(Instant.ofEpochMilli(event.getTimeStamp())));
      json.writeStringField("level", event.getLevel().toString());
      json.writeStringField("logger", event.getLoggerName());
      json.writeStringField("thread", event.getThreadName());
      json.writeStringField("message", event.getFormattedMessage());
      Map<String, String> mdc = event.getMDCPropertyMap();
      if (mdc != null && !mdc.isEmpty()) {
        json.writeObjectFieldStart("mdc");
        for (Map.Entry<String, String> entry : new TreeMap<>(mdc).entrySet()) {
          json.writeStringField(entry.getKey(), entry.getValue());
        }
        json.writeEndObject();
      }
      IThrowableProxy thrown = event.getThrowableProxy();
      if (thrown != null) {
        json.writeStringField("exception", ThrowableProxyUtil.asString(thrown).stripTrailing());
      }
      json.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a StringWriter does not fail
    }
    return line.append(CoreConstants.LINE_SEPARATOR).toString();
  }

  @Override
  public String getContentType() {
    return "application/json";
  }
}
