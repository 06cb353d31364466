package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.e2e.TrtLlmRelease.ScheduleStyle;
import io.disaggusage.extproc.emulator.workers.WorkerStartException;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.RecordedRequest;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/**
 * The shipped jar and one real Envoy release on the shipped bootstrap in front of the shared simulated
 * TensorRT-LLM workers (the ones behind the {@code workers} command): a context worker with a real
 * prefix cache and a generation worker reporting {@code variant}'s usage.
 */
final class TrtLlmStack implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient DIRECT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  final EngineWorker context;
  final EngineWorker generation;
  final ServiceProcess service;
  final EnvoyProcess envoy;

  private TrtLlmStack(EngineWorker context, EngineWorker generation, ServiceProcess service, EnvoyProcess envoy) {
    this.context = context;
    this.generation = generation;
    this.service = service;
    this.envoy = envoy;
  }

  /**
   * Starts the workers, the service (ready), then Envoy, and waits until Envoy's health check passes the
   * service; whatever started is stopped again when a later part fails.
   *
   * @param prefillDelay how late the context worker answers, so a generation-first flow's generation
   *     response is at Envoy before the context usage it must wait for
   */
  static TrtLlmStack start(String name, String release, UsageVariant variant, Duration prefillDelay) {
    EngineWorker context = null;
    EngineWorker generation = null;
    ServiceProcess service = null;
    EnvoyProcess envoy = null;
    try {
      context = EngineWorker.start(
          WorkerSpec.of(EngineKind.TRTLLM, WorkerRole.PREFILL, ShippedBootstrap.LOOPBACK, 0).withVariant(variant).withPrefillDelay(prefillDelay));
      generation = EngineWorker.start(WorkerSpec.of(EngineKind.TRTLLM, WorkerRole.DECODE, ShippedBootstrap.LOOPBACK, 0).withVariant(variant));
      service = ServiceProcess.started(name + "-service");
      Topology topology = new Topology(
          FreePorts.next(), FreePorts.next(), FreePorts.next(), List.of(context.port()), List.of(generation.port()), List.of(service.grpcPort()));
      envoy = EnvoyProcess.start(name + "-envoy-" + release, release, topology);
      envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      return new TrtLlmStack(context, generation, service, envoy);
    } catch (WorkerStartException e) {
      new TrtLlmStack(context, generation, service, envoy).close();
      throw new IllegalStateException(e);
    } catch (RuntimeException | AssertionError e) {
      new TrtLlmStack(context, generation, service, envoy).close();
      throw e;
    }
  }

  /**
   * Prefills {@code prompt} (one user message) on the context worker directly, twice, so that every later
   * context call finds the same warm prefix; returns the second answer's usage, the worker's true count.
   */
  JsonNode warm(String prompt, int maxTokens) {
    ObjectNode chat = JSON.createObjectNode().put("model", Wire.MODEL).put("max_tokens", maxTokens);
    chat.putArray("messages").addObject().put("role", "user").put("content", prompt);
    ObjectNode request = TrtLlmRequests.context(chat, 1L << 60, ScheduleStyle.CONTEXT_FIRST);
    JsonNode usage = null;
    for (int i = 0; i < 2; i++) {
      try {
        HttpResponse<String> answer = DIRECT.send(
            HttpRequest.newBuilder(context.url().resolve("v1/chat/completions"))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(request.toString())).build(),
            HttpResponse.BodyHandlers.ofString());
        usage = JSON.readTree(answer.body()).path("usage");
      } catch (IOException e) {
        throw new UncheckedIOException("warming the context worker", e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    return usage;
  }

  /** A chat request a worker received, MessagePack read as the JSON it stands for. */
  static JsonNode json(RecordedRequest request) {
    try {
      if (request.headerValues("x-trtllm-msgpack").contains("1")) {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(request.body())) {
          return JSON.readTree(unpacker.unpackValue().toJson());
        }
      }
      return JSON.readTree(request.body());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The access-log lines of the generation listener so far. */
  List<AccessLogLine> generationLines() {
    return envoy.accessLog("generation");
  }

  @Override
  public void close() {
    if (envoy != null) {
      envoy.close();
    }
    if (service != null) {
      service.close();
    }
    if (context != null) {
      context.close();
    }
    if (generation != null) {
      generation.close();
    }
  }
}
