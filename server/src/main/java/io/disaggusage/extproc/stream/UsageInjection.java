package io.disaggusage.extproc.stream;

import com.google.protobuf.ByteString;
import io.disaggusage.extproc.classify.Classification;
import io.disaggusage.extproc.classify.RequestHead;
import io.disaggusage.extproc.rewrite.Bytes;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.rewrite.ResponseProcessors;
import io.disaggusage.extproc.inject.IncludeUsageInjector;
import io.disaggusage.extproc.inject.InjectionOutcome;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.usage.ApiShape;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * {@code streaming.inject_include_usage} for one exchange, between Envoy's messages and the pure
 * rewriters: which requests may be rewritten (decided at the request headers, before the body is
 * seen, because the headers reply must already remove {@code content-length}), the rewrite of the
 * request body chunk by chunk, and whether the response must be read to take the added usage event
 * out again. Outcomes are counted here. Guarded by the owning stream's monitor.
 */
final class UsageInjection {
  /** TensorRT-LLM's orchestrator sends MessagePack request bodies with this header. */
  static final String MSGPACK_HEADER = "x-trtllm-msgpack";

  private final ExchangeServices services;
  /** Asked once the request object is complete: whether the service reads this leg's response. */
  private final IncludeUsageInjector.LegProbe readsResponse;
  private IncludeUsageInjector injector;
  /** Request bytes given back when the rewrite stopped early; they go out with the next chunk. */
  private byte[] pending = Bytes.EMPTY;
  private boolean injected;
  private boolean removesUsage;

  private UsageInjection(ExchangeServices services, Supplier<Classification> classification) {
    this.services = services;
    this.readsResponse = () -> readsResponse(classification.get());
    this.injector = new IncludeUsageInjector(services.config().limits().maxBodyBytes());
  }

  /**
   * For a handled request with a body: the injection, or null when it is off or cannot apply
   * (counted).
   *
   * @param classification the request's classification as read so far; asked once the request object
   *     is complete, to learn whether it is a leg whose response the service reads
   */
  static UsageInjection begin(
      ExchangeServices services,
      RequestHead head,
      ApiShape shape,
      boolean endOfStream,
      Supplier<Classification> classification) {
    if (!services.config().streaming().injectIncludeUsage() || endOfStream || !shape.injectsIncludeUsage()) {
      return null; // no body, or an API shape (Responses) that reports usage in every stream
    }
    InjectionOutcome skip = skipReason(head, services.config().classification().stripAcceptEncoding());
    if (skip != null) {
      services.metrics().injection(skip);
      return null;
    }
    return new UsageInjection(services, classification);
  }

  /** Why a request cannot be rewritten, judged from its headers; null when it may be. */
  static InjectionOutcome skipReason(RequestHead head, boolean acceptEncodingStripped) {
    String msgpack = head.header(MSGPACK_HEADER);
    if (msgpack != null && (msgpack.trim().equals("1") || msgpack.trim().equalsIgnoreCase("true"))) {
      return InjectionOutcome.MSGPACK;
    }
    String type = head.header("content-type");
    if (!identity(head.header("content-encoding"))
        || (type != null && !type.toLowerCase(Locale.ROOT).contains("json"))
        // A compressed response could not have its usage event taken out.
        || (!acceptEncodingStripped && !identity(head.header("accept-encoding")))) {
      return InjectionOutcome.UNSUPPORTED_ENCODING;
    }
    return null;
  }

  private static boolean identity(String encoding) {
    return encoding == null || encoding.isBlank() || encoding.trim().equalsIgnoreCase("identity");
  }

  /**
   * The request-headers mutation: the body may grow, so the {@code content-length} Envoy saw must not
   * reach the worker (Envoy does not remove it when streaming is turned on by {@code mode_override}).
   */
  static HeaderMutation headerMutation(boolean stripAcceptEncoding) {
    return stripAcceptEncoding
        ? EnvoyMessages.removeHeaders("content-length", "accept-encoding")
        : EnvoyMessages.removeHeaders("content-length");
  }

  /** The replacement for one request body chunk, or null to forward it as it came. */
  ByteString onRequestBody(HttpBody chunk, boolean abandoned) {
    if (injector != null && abandoned) {
      stop(); // the response side is gone: nothing could take the usage event out again
    }
    if (injector == null) {
      if (pending.length == 0) {
        return null;
      }
      byte[] out = Bytes.concat(pending, BodyBytes.of(chunk.getBody()));
      pending = Bytes.EMPTY;
      return BodyBytes.wrap(out);
    }
    byte[] in = BodyBytes.of(chunk.getBody());
    byte[] out = injector.accept(in, chunk.getEndOfStream(), readsResponse);
    if (injector.outcome() != null) {
      finished();
    }
    return out == in || Arrays.equals(out, in) ? null : BodyBytes.wrap(out);
  }

  /** Whether the service reads the response of a request so classified (and can take the event out). */
  private static boolean readsResponse(Classification classification) {
    Phase phase = classification.phase();
    return phase == Phase.CONTEXT || phase == Phase.GENERATION;
  }

  private void stop() {
    pending = Bytes.concat(pending, injector.stop());
    finished();
  }

  private void finished() {
    services.metrics().injection(injector.outcome());
    injected = injector.injected();
    injector = null; // its buffers would otherwise live as long as the response streams
  }

  /**
   * The response headers arrived. A request still being rewritten is let go as it is. Returns whether
   * the response body must be read to take out the usage event the rewrite caused; otherwise what
   * became of that event is counted here.
   *
   * @param success a 2xx status with a body to come
   */
  boolean onResponseHeaders(boolean success, boolean identity, boolean eventStream) {
    if (injector != null) {
      stop();
    }
    if (!injected) {
      return false;
    }
    if (!success || !eventStream) {
      services.metrics().injectedUsageEvent(UsageRemoval.ABSENT); // errors and JSON carry no usage event
    } else if (!identity) {
      services.metrics().injectedUsageEvent(UsageRemoval.LEAKED);
    } else {
      removesUsage = true;
    }
    return removesUsage;
  }

  /** Whether the response body is read to take the usage event out. */
  boolean removesUsage() {
    return removesUsage;
  }

  /** The response body processors that take the usage event out. */
  ResponseProcessors processors() {
    return services.processors().removingInjectedUsage(services.metrics()::injectedUsageEvent);
  }
}
