package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A real OpenTelemetry Collector (scripts/otelcol: the OTLP receiver and the file exporter) on a free
 * port, writing every push it receives to a file as one OTLP JSON object per line, read back by
 * {@link #pushes()}.
 */
final class OtelCollector extends ChildProcess {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final int httpPort = FreePorts.next();
  private final Path config;
  private final Path received;

  private OtelCollector(String name) {
    super(name, Tools.logs().resolve(name + ".log"), Duration.ofSeconds(5));
    this.config = Tools.logs().resolve(name + ".yaml");
    this.received = Tools.logs().resolve(name + ".otlp.jsonl");
  }

  /** Starts one and waits until it says it is ready. */
  static OtelCollector started(String name) {
    OtelCollector collector = new OtelCollector(name);
    collector.start();
    return collector;
  }

  private void start() {
    try {
      Files.deleteIfExists(received);
      Files.deleteIfExists(log());
      // flush_interval: the exporter buffers and writes every second by default
      Files.writeString(config, String.join("\n",
          "receivers:",
          "  otlp:",
          "    protocols:",
          "      http:",
          "        endpoint: 127.0.0.1:" + httpPort,
          "exporters:",
          "  file:",
          "    path: " + received,
          "    flush_interval: 100ms",
          "service:",
          "  pipelines:",
          "    metrics:",
          "      receivers: [otlp]",
          "      exporters: [file]",
          ""));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    launch(List.of(Tools.otelcol().toString(), "--config", config.toString()));
    await("'Everything is ready'", Duration.ofSeconds(20), () -> {
      try {
        return Files.readString(log()).contains("Everything is ready");
      } catch (IOException e) {
        return false;
      }
    });
  }

  /** The collector's OTLP/HTTP base URL, the service's {@code metrics.otlp.endpoint}. */
  String endpoint() {
    return "http://127.0.0.1:" + httpPort;
  }

  /** Every push received so far, oldest first (an ExportMetricsServiceRequest in OTLP JSON each). */
  List<JsonNode> pushes() {
    List<JsonNode> pushes = new ArrayList<>();
    try {
      if (!Files.exists(received)) {
        return pushes;
      }
      for (String line : Files.readAllLines(received)) {
        if (!line.isBlank()) {
          try {
            pushes.add(JSON.readTree(line));
          } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            break; // the last line, still being written
          }
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return pushes;
  }
}
