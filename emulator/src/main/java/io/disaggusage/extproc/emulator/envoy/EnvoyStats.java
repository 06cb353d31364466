package io.disaggusage.extproc.emulator.envoy;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counters named like Envoy's {@code http.<prefix>.ext_proc.*} stats. The {@link FakeEnvoy} keeps
 * one instance across all exchanges; every {@link ExchangeResult} carries its own.
 */
public final class EnvoyStats {
  public static final String STREAMS_STARTED = "streams_started";
  public static final String STREAM_MSGS_SENT = "stream_msgs_sent";
  public static final String STREAM_MSGS_RECEIVED = "stream_msgs_received";
  public static final String SPURIOUS_MSGS_RECEIVED = "spurious_msgs_received";
  public static final String STREAMS_CLOSED = "streams_closed";
  public static final String STREAMS_FAILED = "streams_failed";
  public static final String FAILURE_MODE_ALLOWED = "failure_mode_allowed";
  public static final String MESSAGE_TIMEOUTS = "message_timeouts";
  public static final String REJECTED_HEADER_MUTATIONS = "rejected_header_mutations";
  public static final String OVERRIDE_MESSAGE_TIMEOUT_RECEIVED = "override_message_timeout_received";
  public static final String OVERRIDE_MESSAGE_TIMEOUT_IGNORED = "override_message_timeout_ignored";
  public static final String CLEAR_ROUTE_CACHE_IGNORED = "clear_route_cache_ignored";
  public static final String CLEAR_ROUTE_CACHE_DISABLED = "clear_route_cache_disabled";

  private final Map<String, AtomicLong> counters = new ConcurrentHashMap<>();

  void inc(String name) {
    counters.computeIfAbsent(name, k -> new AtomicLong()).incrementAndGet();
  }

  /** The counter value (0 when never incremented). */
  public long get(String name) {
    AtomicLong v = counters.get(name);
    return v == null ? 0 : v.get();
  }

  public long streamsStarted() {
    return get(STREAMS_STARTED);
  }

  public long streamMsgsSent() {
    return get(STREAM_MSGS_SENT);
  }

  public long streamMsgsReceived() {
    return get(STREAM_MSGS_RECEIVED);
  }

  public long spuriousMsgsReceived() {
    return get(SPURIOUS_MSGS_RECEIVED);
  }

  public long streamsClosed() {
    return get(STREAMS_CLOSED);
  }

  public long streamsFailed() {
    return get(STREAMS_FAILED);
  }

  public long failureModeAllowed() {
    return get(FAILURE_MODE_ALLOWED);
  }

  public long messageTimeouts() {
    return get(MESSAGE_TIMEOUTS);
  }

  public long rejectedHeaderMutations() {
    return get(REJECTED_HEADER_MUTATIONS);
  }

  public long overrideMessageTimeoutReceived() {
    return get(OVERRIDE_MESSAGE_TIMEOUT_RECEIVED);
  }

  public long overrideMessageTimeoutIgnored() {
    return get(OVERRIDE_MESSAGE_TIMEOUT_IGNORED);
  }

  /** All non-zero counters, sorted by name. */
  public Map<String, Long> snapshot() {
    Map<String, Long> out = new TreeMap<>();
    counters.forEach((k, v) -> out.put(k, v.get()));
    return out;
  }

  @Override
  public String toString() {
    return snapshot().toString();
  }
}
