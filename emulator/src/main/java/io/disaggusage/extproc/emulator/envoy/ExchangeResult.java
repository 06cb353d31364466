package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Everything observable about one finished exchange. */
public final class ExchangeResult {

  /** How the ext_proc gRPC stream ended. */
  public enum StreamEnd {
    /** No message was ever needed, so no stream was opened. */
    NOT_OPENED,
    /** Envoy half-closed and reset it (server sees the half-close, then CANCELLED). */
    CLOSED_BY_ENVOY,
    /** The server finished the call with OK before Envoy closed it. */
    SERVER_CLOSED_OK,
    /** The server finished the call with an error status. */
    SERVER_FAILED,
    /** The downstream client aborted; Envoy half-closed and reset the stream, as it does on its message timeout. */
    RESET_BY_DOWNSTREAM
  }

  private static final Pattern DYNAMIC_METADATA =
      Pattern.compile("%DYNAMIC_METADATA\\(([^:)]+)((?::[^:)]+)*)\\)%");

  private final Exchange exchange;
  private final UpstreamRequest upstreamRequest;
  private final ClientResponse clientResponse;
  private final Map<String, Struct> dynamicMetadata;
  private final List<ProcessingRequest> messagesSent;
  private final List<ProcessingResponse> messagesReceived;
  private final EnvoyStats stats;
  private final StreamEnd streamEnd;
  private final Status serverStatus;

  ExchangeResult(
      Exchange exchange,
      UpstreamRequest upstreamRequest,
      ClientResponse clientResponse,
      Map<String, Struct> dynamicMetadata,
      List<ProcessingRequest> messagesSent,
      List<ProcessingResponse> messagesReceived,
      EnvoyStats stats,
      StreamEnd streamEnd,
      Status serverStatus) {
    this.exchange = exchange;
    this.upstreamRequest = upstreamRequest;
    this.clientResponse = clientResponse;
    this.dynamicMetadata = Map.copyOf(dynamicMetadata);
    this.messagesSent = List.copyOf(messagesSent);
    this.messagesReceived = List.copyOf(messagesReceived);
    this.stats = stats;
    this.streamEnd = streamEnd;
    this.serverStatus = serverStatus;
  }

  public Exchange exchange() {
    return exchange;
  }

  public UpstreamRequest upstreamRequest() {
    return upstreamRequest;
  }

  public ClientResponse clientResponse() {
    return clientResponse;
  }

  /** Shortcut for {@code clientResponse().contentLengthMismatch()}. */
  public boolean contentLengthMismatch() {
    return clientResponse.contentLengthMismatch();
  }

  /** The stream's dynamic metadata (only namespaces accepted per receiving_namespaces, plus preset ones). */
  public Map<String, Struct> dynamicMetadata() {
    return dynamicMetadata;
  }

  /** A value at {@code namespace:key[:key...]}, if present. */
  public Optional<Value> dynamicMetadataValue(String namespace, String... path) {
    Struct s = dynamicMetadata.get(namespace);
    if (s == null || path.length == 0) {
      return Optional.empty();
    }
    Value v = null;
    for (String key : path) {
      if (s == null || !s.containsFields(key)) {
        return Optional.empty();
      }
      v = s.getFieldsOrThrow(key);
      s = v.hasStructValue() ? v.getStructValue() : null;
    }
    return Optional.ofNullable(v);
  }

  /**
   * Renders an access-log format string, substituting {@code %DYNAMIC_METADATA(ns:key)%}
   * (and nested {@code ns:key:sub}) like Envoy does: strings raw, integral numbers without a
   * fraction, structs/lists as JSON, {@code -} when absent.
   */
  public String accessLog(String format) {
    Matcher m = DYNAMIC_METADATA.matcher(format);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String ns = m.group(1);
      String[] path = m.group(2).isEmpty() ? new String[0] : m.group(2).substring(1).split(":");
      String rendered;
      if (path.length == 0) {
        Struct s = dynamicMetadata.get(ns);
        rendered = s == null ? "-" : json(Value.newBuilder().setStructValue(s).build());
      } else {
        rendered = dynamicMetadataValue(ns, path).map(ExchangeResult::render).orElse("-");
      }
      m.appendReplacement(out, Matcher.quoteReplacement(rendered));
    }
    m.appendTail(out);
    return out.toString();
  }

  private static String render(Value v) {
    return switch (v.getKindCase()) {
      case STRING_VALUE -> v.getStringValue();
      case NUMBER_VALUE -> {
        double d = v.getNumberValue();
        yield d == Math.rint(d) && Math.abs(d) < 9.007199254740992E15
            ? Long.toString((long) d)
            : Double.toString(d);
      }
      case BOOL_VALUE -> Boolean.toString(v.getBoolValue());
      case NULL_VALUE, KIND_NOT_SET -> "-";
      default -> json(v);
    };
  }

  private static String json(Value v) {
    try {
      return JsonFormat.printer().omittingInsignificantWhitespace().print(v);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * What went wrong in this exchange from the client's or the operator's side, empty when nothing did:
   * a reset, a local reply by Envoy, a content-length that disagrees with the body, message timeouts,
   * spurious replies, a failed ext_proc stream, or fail-open (the exchange continued unprocessed).
   */
  public List<String> problems() {
    List<String> problems = new ArrayList<>();
    if (clientResponse.reset()) {
      problems.add("the client's stream was reset");
    }
    clientResponse
        .localReply()
        .ifPresent(r -> problems.add("Envoy answered the client itself: " + r.status() + " " + r.details()));
    if (contentLengthMismatch()) {
      problems.add("content-length disagrees with the body the client got");
    }
    count(problems, EnvoyStats.MESSAGE_TIMEOUTS, "ext_proc message timeout");
    count(problems, EnvoyStats.SPURIOUS_MSGS_RECEIVED, "spurious ext_proc reply");
    if (streamEnd == StreamEnd.SERVER_FAILED) {
      problems.add("the ext_proc stream failed: " + serverStatus);
    }
    count(problems, EnvoyStats.FAILURE_MODE_ALLOWED, "fail-open: the exchange went on unprocessed");
    return problems;
  }

  private void count(List<String> problems, String counter, String what) {
    long n = stats.get(counter);
    if (n > 0) {
      problems.add(n == 1 ? what : what + " (" + n + " times)");
    }
  }

  /** Every ProcessingRequest sent on the stream, in order. */
  public List<ProcessingRequest> messagesSent() {
    return messagesSent;
  }

  /** Every ProcessingResponse received on the stream (including ignored ones), in order. */
  public List<ProcessingResponse> messagesReceived() {
    return messagesReceived;
  }

  /** Counters of this exchange only. */
  public EnvoyStats stats() {
    return stats;
  }

  public StreamEnd streamEnd() {
    return streamEnd;
  }

  /** The status the server finished the call with, if it did before Envoy closed it. */
  public Optional<Status> serverStatus() {
    return Optional.ofNullable(serverStatus);
  }

  @Override
  public String toString() {
    return "ExchangeResult["
        + exchange.name()
        + " status="
        + clientResponse.status()
        + " reset="
        + clientResponse.reset()
        + " details="
        + clientResponse.responseCodeDetails()
        + " sent="
        + messagesSent.size()
        + " received="
        + messagesReceived.size()
        + " end="
        + streamEnd
        + " stats="
        + stats
        + "]";
  }
}
