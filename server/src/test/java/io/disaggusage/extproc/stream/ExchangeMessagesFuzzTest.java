package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.stream.ExchangeStreamFuzzTest.Service;
import io.disaggusage.extproc.driver.EnvoyStream;
import io.disaggusage.extproc.scenario.DirectEnvoy;
import io.disaggusage.extproc.scenario.ServiceUnderTest;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Fuzzes the per-exchange state machine with any sequence of Envoy messages (headers with fuzzed
 * phases, keys, statuses and encodings, bodies, trailers, duplicate end_of_stream messages, completes
 * and resets) on interleaved streams of one service: no exception escapes, every message that is
 * owed a reply gets exactly one, of the right kind, in order; a response body that ended comes out
 * untouched unless rewritten; and afterwards no stream is open and no waiter is left. Each input byte
 * pair is one operation (see the switch). Corpus: {@code ExchangeMessagesFuzzTestInputs/}.
 */
class ExchangeMessagesFuzzTest {
  static final String[] PATHS = {"/v1/chat/completions", "/v1/responses", "/v1/completions", "/health"};
  static final String[] PHASES = {null, "context", "decode", "prefill", "generation", "bogus"};
  static final String[] KEYS = {null, "k1", "k2", "x".repeat(300)};
  static final String[] STATUSES = {"200", "503", "204", "2", ""};
  static final String[] TYPES = {"application/json", "text/event-stream", "text/plain", ""};
  static final String[] ENCODINGS = {null, "gzip", "identity", " IDENTITY "};
  static final String CTX_BODY = "{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":2}}}";

  /** Per-stream bookkeeping of the fuzz driver. */
  static final class Tracked {
    final EnvoyStream stream;
    boolean requestEnded;
    boolean responseEnded;
    boolean responseBodySeen;
    boolean requestHeadersSent;
    boolean responseHeadersSent;
    boolean closed;
    final ByteArrayOutputStream sent = new ByteArrayOutputStream();

    Tracked(EnvoyStream stream) {
      this.stream = stream;
    }
  }

  @FuzzTest(maxDuration = "60s")
  void arbitraryMessageSequences(byte[] input) {
    Service s = Service.start(4096, 256);
    List<Tracked> streams = new ArrayList<>();
    streams.add(new Tracked(s.envoy().open()));
    streams.add(new Tracked(s.envoy().open()));
    int p = 0;
    while (p < input.length) {
      int op = input[p++] & 0xff;
      Tracked t = streams.get(op & 1);
      if (t.closed) {
        continue;
      }
      int a = p < input.length ? input[p++] & 0xff : 0;
      switch ((op >>> 1) % 8) {
        case 0 -> {
          if (t.requestHeadersSent) {
            continue; // Envoy sends each headers message once
          }
          t.requestHeadersSent = true;
          HeaderMap.Builder h = headers(":method", (a & 128) == 0 ? "POST" : "GET", ":path", PATHS[a % PATHS.length]);
          add(h, "x-disagg-phase", PHASES[(a >>> 2) % PHASES.length]);
          add(h, "x-disagg-request-id", KEYS[(a >>> 4) % KEYS.length]);
          add(h, "x-disagg-order", (a & 64) == 0 ? null : "concurrent");
          ProcessingRequest.Builder r =
              ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h).setEndOfStream((a & 32) != 0 && (a & 1) == 0));
          if ((a & 8) != 0) {
            r.putAttributes("envoy.filters.http.ext_proc", Struct.newBuilder().putFields("xds.cluster_name",
                Value.newBuilder().setStringValue((a & 16) == 0 ? ServiceUnderTest.CONTEXT_CLUSTER : ServiceUnderTest.GENERATION_CLUSTER).build()).build());
          }
          t.stream.raw(r.build(), true);
        }
        case 1 -> {
          int n = Math.min(a % 40, input.length - p);
          byte[] chunk = (a & 1) == 0 ? Arrays.copyOfRange(input, p, p + n) : "{\"kv_transfer_params\":{\"do_remote_decode\":true}}".getBytes();
          p += n;
          boolean eos = (op & 64) != 0;
          if (!t.stream.envoyWouldSend(ProcessingRequest.RequestCase.REQUEST_BODY)) {
            continue;
          }
          t.stream.raw(ProcessingRequest.newBuilder().setRequestBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(eos)).build(),
              !t.requestEnded);
          t.requestEnded |= eos;
        }
        case 2 -> {
          HeaderMap.Builder h = headers(":status", STATUSES[a % STATUSES.length], "content-type", TYPES[(a >>> 3) % TYPES.length]);
          add(h, "content-encoding", ENCODINGS[(a >>> 5) % ENCODINGS.length]);
          if (t.responseHeadersSent || !t.stream.envoyWouldSend(ProcessingRequest.RequestCase.RESPONSE_HEADERS)) {
            continue;
          }
          t.responseHeadersSent = true;
          t.stream.raw(ProcessingRequest.newBuilder().setResponseHeaders(HttpHeaders.newBuilder().setHeaders(h)).build(), true);
        }
        case 3, 4 -> {
          int n = Math.min(a % 64, input.length - p);
          byte[] chunk = (op & 16) == 0 ? Arrays.copyOfRange(input, p, p + n) : CTX_BODY.getBytes();
          p += n;
          boolean eos = (op & 64) != 0;
          if (!t.stream.envoyWouldSend(ProcessingRequest.RequestCase.RESPONSE_BODY)) {
            continue;
          }
          boolean expected = !t.responseEnded;
          t.stream.raw(ProcessingRequest.newBuilder().setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(eos)).build(),
              expected);
          if (expected) {
            t.sent.writeBytes(chunk);
            t.responseBodySeen = true;
          }
          t.responseEnded |= eos;
        }
        case 5 -> t.stream.raw(ProcessingRequest.newBuilder().setResponseTrailers(HttpTrailers.getDefaultInstance()).build(), true);
        case 6 -> {
          if ((a & 1) == 0) {
            t.stream.complete();
          } else {
            t.stream.cancel();
          }
          t.closed = true;
          streams.add(new Tracked(s.envoy().open()));
        }
        default -> t.stream.raw(ProcessingRequest.newBuilder().setRequestTrailers(HttpTrailers.getDefaultInstance()).build(), true);
      }
      assertThat(t.stream.violation()).as("protocol").isNull();
    }
    for (Tracked t : streams) {
      if (t.stream.owed() == 0 && t.responseEnded && t.responseBodySeen
          && !"rewritten".equals(t.stream.metadata("disagg_usage", "outcome"))) {
        assertThat(t.stream.clientBody()).as("untouched unless rewritten").isEqualTo(t.sent.toByteArray());
      }
      if (!t.closed) {
        t.stream.cancel();
      }
    }
    assertThat(s.metrics().activeStreams()).isZero();
    assertThat(s.store().waiters()).isZero();
    s.store().close();
  }

  static HeaderMap.Builder headers(String... pairs) {
    HeaderMap.Builder h = HeaderMap.newBuilder();
    for (int i = 0; i < pairs.length; i += 2) {
      add(h, pairs[i], pairs[i + 1]);
    }
    return h;
  }

  static void add(HeaderMap.Builder h, String key, String value) {
    if (value != null) {
      h.addHeaders(HeaderValue.newBuilder().setKey(key).setRawValue(ByteString.copyFromUtf8(value)));
    }
  }
}
