package io.disaggusage.extproc.emulator.workers;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.disaggusage.extproc.emulator.engines.CompletionsWire;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * One simulated engine worker over HTTP/1.1 (the JDK's server): {@code POST /v1/chat/completions} and
 * {@code /v1/completions} answered as the engine's prefill or decode worker does, the health and discovery endpoints of
 * {@link Discovery}, a 404 {@code {"detail":"Not Found"}} (FastAPI's) for anything else, including the
 * gRPC health probes routers try first. Every request is recorded in {@link #log()}.
 */
public final class EngineWorker implements AutoCloseable {
  /** Blocks a worker's prefix cache holds: far more than a test's or a user's requests fill. */
  private static final int CACHE_BLOCKS = 4096;

  static final String CHAT_COMPLETIONS = "/v1/chat/completions";
  static final String COMPLETIONS = CompletionsWire.PATH;

  private final WorkerSpec spec;
  private final RequestLog log = new RequestLog();
  private final ExecutorService executor;
  private final HttpServer server;
  private final BootstrapServer bootstrap;
  private final CompletionHandler completions;
  private final Discovery discovery;

  private EngineWorker(WorkerSpec spec, ExecutorService executor) throws IOException {
    this.spec = spec;
    this.executor = executor;
    PrefixCache cache = new PrefixCache(PrefixCache.DEFAULT_BLOCK_TOKENS, CACHE_BLOCKS);
    bootstrap =
        spec.engine() == EngineKind.SGLANG && spec.role() == WorkerRole.PREFILL
            ? new BootstrapServer(new InetSocketAddress(spec.host(), spec.bootstrapPort()), executor)
            : null;
    try {
      completions = completionHandler(spec, cache, bootstrap);
      server = HttpServer.create(new InetSocketAddress(spec.host(), spec.port()), 64);
    } catch (IOException | RuntimeException e) {
      if (bootstrap != null) {
        bootstrap.close();
      }
      throw e;
    }
    discovery = new Discovery(spec, server.getAddress().getPort(), bootstrap != null ? bootstrap.port() : 0);
    server.createContext("/", this::handle);
    server.setExecutor(executor);
    server.start();
  }

  /**
   * Starts the worker {@code spec} describes.
   *
   * @throws WorkerStartException when its address cannot be bound, naming the worker and the address
   */
  public static EngineWorker start(WorkerSpec spec) throws WorkerStartException {
    ExecutorService executor =
        Executors.newCachedThreadPool(
            runnable -> {
              Thread thread = new Thread(runnable, "disagg-usage-worker-" + spec.engine().label());
              thread.setDaemon(true);
              return thread;
            });
    try {
      return new EngineWorker(spec, executor);
    } catch (BindException e) {
      executor.shutdownNow();
      throw new WorkerStartException(spec.description() + ": " + spec.host() + " port in use or not local (" + e.getMessage() + ")", e);
    } catch (IOException | RuntimeException e) {
      executor.shutdownNow();
      throw new WorkerStartException(spec.description() + ": cannot listen on " + spec.host() + ": " + e.getMessage(), e);
    }
  }

  /**
   * The engine's completions; the cache is the prefill's prefix cache, SGLang's decode radix cache or a vLLM
   * decode's own cache for the requests it serves whole (a vLLM prefill serves those on its prefix cache).
   */
  private static CompletionHandler completionHandler(WorkerSpec spec, PrefixCache cache, BootstrapServer bootstrap) {
    return switch (spec.engine()) {
      case TRTLLM -> new EngineLegHandler(new TrtLlmEngine(cache, spec.variant()), spec.role(), true);
      case VLLM -> new VllmWorkerHandler(new EngineLegHandler(new VllmEngine(cache, spec.variant()), spec.role(), false), cache);
      case SGLANG ->
          spec.role() == WorkerRole.PREFILL
              ? new SglangPrefillHandler(cache, bootstrap)
              : new SglangDecodeHandler(cache, spec.variant());
    };
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      RecordedRequest request =
          new RecordedRequest(
              exchange.getRequestMethod(), exchange.getRequestURI().getPath(),
              Optional.ofNullable(exchange.getRequestURI().getRawQuery()).orElse(""), exchange.getRequestHeaders(),
              exchange.getRequestBody().readAllBytes());
      if (CHAT_COMPLETIONS.equals(request.path()) || COMPLETIONS.equals(request.path())) {
        log.completion(request);
        if (!"POST".equals(request.method())) {
          ReplyWriter.send(exchange, notFound(405, "Method Not Allowed"), Duration.ZERO);
          return;
        }
        WorkerReply reply = completions.complete(request);
        if (COMPLETIONS.equals(request.path())) {
          reply = CompletionsWire.fromChat(reply, spec.engine().style());
        }
        if (spec.role() == WorkerRole.PREFILL) {
          ReplyWriter.pause(spec.prefillDelay());
        } else if (!reply.contentType().startsWith("text/event-stream")) {
          ReplyWriter.pause(spec.tokenDelay().multipliedBy(Math.max(0, reply.truth().completion())));
        }
        ReplyWriter.send(exchange, reply, spec.tokenDelay());
        return;
      }
      log.probe(request);
      Optional<WorkerReply> answer = "GET".equals(request.method()) ? discovery.answer(request.path()) : Optional.empty();
      ReplyWriter.send(exchange, answer.orElseGet(() -> notFound(404, "Not Found")), Duration.ZERO);
    }
  }

  /** FastAPI's answer to an unknown path or method. */
  private static WorkerReply notFound(int status, String detail) {
    return new WorkerReply(
        status, OpenAiWire.JSON_TYPE,
        OpenAiWire.bytes(OpenAiWire.JSON.createObjectNode().put("detail", detail)), TokenCounts.UNKNOWN);
  }

  public WorkerSpec spec() {
    return spec;
  }

  /** The bound port (the given one, or the free one chosen for 0). */
  public int port() {
    return server.getAddress().getPort();
  }

  /** The worker's base URL, e.g. {@code http://127.0.0.1:30001/}. */
  public URI url() {
    String host = spec.host().contains(":") ? "[" + spec.host() + "]" : spec.host();
    return URI.create("http://" + host + ":" + port() + "/");
  }

  /** A SGLang prefill's bound bootstrap port; empty for other workers. */
  public Optional<Integer> bootstrapPort() {
    return Optional.ofNullable(bootstrap).map(BootstrapServer::port);
  }

  /** What the worker received. */
  public RequestLog log() {
    return log;
  }

  /** One line for a person: engine, role, URL and, for a SGLang prefill, its bootstrap port. */
  public String describe() {
    return spec.engine().label() + " " + spec.role().label(spec.engine()) + " " + url()
        + bootstrapPort().map(p -> " bootstrap-port " + p).orElse("");
  }

  @Override
  public void close() {
    server.stop(0);
    if (bootstrap != null) {
      bootstrap.close();
    }
    executor.shutdownNow();
  }
}
