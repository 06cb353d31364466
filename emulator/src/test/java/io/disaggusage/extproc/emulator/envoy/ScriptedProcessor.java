package io.disaggusage.extproc.emulator.envoy;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.BindableService;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A small ext_proc server for tests: every received message is handed to a {@link Script} together
 * with a per-stream {@link Stream} that records what happened (messages, half-close, cancel,
 * initial metadata, authority) and sends replies (immediately, later, or never).
 */
public final class ScriptedProcessor implements ExternalProcessorGrpc.AsyncService, BindableService {

  /** The server's behaviour. */
  @FunctionalInterface
  public interface Script {
    void onMessage(ProcessingRequest request, Stream stream);
  }

  private static final Context.Key<Metadata> HEADERS = Context.key("headers");
  private static final Context.Key<String> AUTHORITY = Context.key("authority");

  private final Script script;
  private final List<Stream> streams = new CopyOnWriteArrayList<>();
  /** The n-th stream opened (0-based), completed when it opens; asked for before or after. */
  private final Map<Integer, CompletableFuture<Stream>> opened = new ConcurrentHashMap<>();
  private final ScheduledExecutorService scheduler =
      Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "scripted-processor");
        t.setDaemon(true);
        return t;
      });

  public ScriptedProcessor(Script script) {
    this.script = script;
  }

  /** Answers every message with a no-mutation reply. */
  public static ScriptedProcessor passThrough() {
    return new ScriptedProcessor((req, s) -> s.reply(ExtProcReplies.pass(req)));
  }

  public List<Stream> streams() {
    return List.copyOf(streams);
  }

  /** The n-th stream opened (0-based), waiting up to 5 s for it. */
  public Stream stream(int index) {
    try {
      return opened(index).get(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("stream " + index + " never opened", e);
    }
  }

  private CompletableFuture<Stream> opened(int index) {
    return opened.computeIfAbsent(index, i -> new CompletableFuture<>());
  }

  @Override
  public ServerServiceDefinition bindService() {
    ServerInterceptor capture = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(
          ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        Context ctx = Context.current()
            .withValue(HEADERS, headers)
            .withValue(AUTHORITY, call.getAuthority());
        return Contexts.interceptCall(ctx, call, headers, next);
      }
    };
    return ServerInterceptors.intercept(ExternalProcessorGrpc.bindService(this), capture);
  }

  @Override
  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
    Stream stream = new Stream(
        (ServerCallStreamObserver<ProcessingResponse>) responses, HEADERS.get(), AUTHORITY.get());
    int index;
    synchronized (streams) {
      streams.add(stream);
      index = streams.size() - 1;
    }
    opened(index).complete(stream);
    return new StreamObserver<>() {
      @Override
      public void onNext(ProcessingRequest value) {
        stream.received.add(value);
        script.onMessage(value, stream);
      }

      @Override
      public void onError(Throwable t) {
        stream.ended("cancel");
        stream.cancelled.complete(Status.fromThrowable(t));
      }

      @Override
      public void onCompleted() {
        stream.ended("half-close");
        stream.halfClosed.complete(null);
      }
    };
  }

  /** One Process stream as the server sees it. */
  public final class Stream {
    private final ServerCallStreamObserver<ProcessingResponse> out;
    private final Metadata headers;
    private final String authority;
    final List<ProcessingRequest> received = new CopyOnWriteArrayList<>();
    private final List<ProcessingResponse> sent = Collections.synchronizedList(new ArrayList<>());
    /** Completes when Envoy half-closes. */
    public final CompletableFuture<Void> halfClosed = new CompletableFuture<>();
    /** Completes with CANCELLED when Envoy resets the stream. */
    public final CompletableFuture<Status> cancelled = new CompletableFuture<>();
    /** How the stream's end reached the server, in order: {@code half-close}, {@code cancel}. */
    public final List<String> ends = new CopyOnWriteArrayList<>();
    /** Scratch space for scripts that keep per-stream state. */
    public final Map<String, Object> state = Collections.synchronizedMap(new HashMap<>());
    private boolean closed;

    Stream(ServerCallStreamObserver<ProcessingResponse> out, Metadata headers, String authority) {
      this.out = out;
      this.headers = headers;
      this.authority = authority;
      // grpc-java calls onError for a cancel only before a half-close; this handler hears both
      out.setOnCancelHandler(() -> {
        ended("cancel");
        cancelled.complete(Status.CANCELLED);
      });
    }

    private synchronized void ended(String how) {
      if (!ends.contains(how)) {
        ends.add(how);
      }
    }

    public List<ProcessingRequest> received() {
      return List.copyOf(received);
    }

    public List<ProcessingResponse> sent() {
      synchronized (sent) {
        return List.copyOf(sent);
      }
    }

    public String initialMetadata(String key) {
      return headers.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER));
    }

    public String authority() {
      return authority;
    }

    public synchronized void reply(ProcessingResponse response) {
      if (closed || out.isCancelled()) {
        return;
      }
      sent.add(response);
      out.onNext(response);
    }

    public void replyLater(ProcessingResponse response, long millis) {
      scheduler.schedule(() -> reply(response), millis, TimeUnit.MILLISECONDS);
    }

    public void later(long millis, Runnable action) {
      scheduler.schedule(action, millis, TimeUnit.MILLISECONDS);
    }

    /** Finishes the call with OK. */
    public synchronized void complete() {
      if (closed || out.isCancelled()) {
        return;
      }
      closed = true;
      out.onCompleted();
    }

    /** Finishes the call with an error status. */
    public synchronized void fail(Status status) {
      if (closed || out.isCancelled()) {
        return;
      }
      closed = true;
      out.onError(status.asRuntimeException());
    }
  }
}
