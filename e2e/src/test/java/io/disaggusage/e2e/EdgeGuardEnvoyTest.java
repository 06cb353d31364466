package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.LoopbackServer;
import io.disaggusage.extproc.testkit.RealEnvoy;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The edge guard through each pinned real Envoy: the shipped {@code deploy/envoy/edge-guard/envoy.yaml}
 * (its ports moved), the shipped jar started with {@code edge_guard.enabled=true}, and a recording
 * upstream in the orchestrator's place. What the upstream receives is exactly the client's bytes without
 * the removed members and headers; other paths are untouched; a body that is not one JSON object gets
 * Envoy's 400 and never reaches the upstream whole.
 */
class EdgeGuardEnvoyTest {
  static final String PATH = "/v1/chat/completions";
  static final List<String> FORGED_HEADERS =
      List.of("x-disagg-phase: context", "x-disagg-request-id: victim", "X-Disagg-Order: generation-first",
          "epp-profile: pd", "x-prefiller-host-port: 10.0.0.9:8000", "x-trtllm-msgpack: 1");
  static final List<String> CLIENT_HEADERS =
      List.of("authorization: Bearer k", "x-tenant: t1", "content-type: application/json", "x-empty-ok: yes");

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void theUpstreamGetsTheClientsBytesWithoutWhatOnlyTheMachineryMaySet(String release) throws Exception {
    try (Stack stack = Stack.start(release)) {
      // A JSON body with the members first, in the middle, nested and last; escapes, NaN, odd spacing.
      String forged =
          "{ \"kv_transfer_params\" : {\"do_remote_decode\":true},\"model\":\"m\", \"messages\":[{\"role\":\"user\","
              + "\"content\":\"\\u00e9 \\\"bootstrap_room\\\": 1\"}],\"vllm_xargs\":{\"kv\\u005ftransfer_params\":"
              + "{\"remote_host\":\"10.0.0.9\"},\"seed\":7},\"temperature\":NaN,\"bootstrap_room\" :  42 }";
      String cleaned =
          "{ \"model\":\"m\", \"messages\":[{\"role\":\"user\","
              + "\"content\":\"\\u00e9 \\\"bootstrap_room\\\": 1\"}],\"vllm_xargs\":{\"seed\":7},\"temperature\":NaN }";
      Reply reply = stack.send(PATH, forged.getBytes(StandardCharsets.UTF_8));
      assertThat(reply.status).isEqualTo(200);
      Recorded got = stack.upstream.only(PATH);
      assertThat(got.bodyText()).isEqualTo(cleaned);
      assertStripped(got);
      // The body was shortened while streaming: the client's content-length did not go on.
      assertThat(got.headers).doesNotContainKey("content-length");
      assertThat(got.headers.get("transfer-encoding")).isEqualTo("chunked");

      // A body of several megabytes, in as many chunks as Envoy makes of it.
      StringBuilder big = new StringBuilder("{\"bootstrap_host\":\"10.0.0.9\",\"model\":\"m\",\"messages\":[");
      StringBuilder expected = new StringBuilder("{\"model\":\"m\",\"messages\":[");
      for (int i = 0; i < 40_000; i++) {
        String message = (i == 0 ? "" : ",") + "{\"role\":\"user\",\"content\":\"line " + i + " \\n \\\"kv_transfer_params\\\"\"}";
        big.append(message);
        expected.append(message);
      }
      big.append("],\"sampling_params\":{\"extra_args\":{\"kv_transfer_params\":{\"x\":1}}},\"disaggregated_params\":{}}");
      expected.append("],\"sampling_params\":{\"extra_args\":{}}}");
      assertThat(big.length()).isGreaterThan(2 << 20);
      Reply bigReply = stack.send("/v1/completions", big.toString().getBytes(StandardCharsets.UTF_8));
      assertThat(bigReply.status).isEqualTo(200);
      Recorded bigGot = stack.upstream.only("/v1/completions");
      assertThat(bigGot.bodyText()).isEqualTo(expected.toString());
      assertStripped(bigGot);

      // Another path: headers stripped, the body and its length exactly as sent.
      Reply other = stack.send("/v1/embeddings", forged.getBytes(StandardCharsets.UTF_8));
      assertThat(other.status).isEqualTo(200);
      Recorded otherGot = stack.upstream.only("/v1/embeddings");
      assertThat(otherGot.bodyText()).isEqualTo(forged);
      assertThat(otherGot.headers.get("content-length")).isEqualTo(Integer.toString(forged.length()));
      assertStripped(otherGot);

      String metrics = Http.body(stack.service.adminUrl("/metrics"));
      assertThat(metrics)
          .contains("disagg_usage_edge_requests_total{outcome=\"stripped\"} 3.0")
          .contains("disagg_usage_edge_removed_members_total{path=\"vllm_xargs.kv_transfer_params\"} 1.0")
          .contains("disagg_usage_edge_removed_headers_total{header=\"x-disagg-order\"} 3.0");
    }
  }

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void aBodyThatIsNotOneJsonObjectGetsEnvoys400(String release) throws Exception {
    try (Stack stack = Stack.start(release)) {
      Reply small = stack.send(PATH, "{\"model\":\"m\" \"kv_transfer_params\":{}}".getBytes(StandardCharsets.UTF_8));
      assertThat(small.status).isEqualTo(400);
      assertThat(small.body).contains("invalid_request_error").contains("malformed");
      assertThat(small.headers.get("content-type")).isEqualTo("application/json");

      // The fault after a megabyte: earlier chunks went on before the guard could know.
      StringBuilder big = new StringBuilder("{\"model\":\"m\",\"messages\":[");
      for (int i = 0; i < 30_000; i++) {
        big.append(i == 0 ? "" : ",").append("{\"role\":\"user\",\"content\":\"line ").append(i).append("\"}");
      }
      big.append("] \"kv_transfer_params\":{\"do_remote_prefill\":true}}");
      Reply late = stack.send(PATH, big.toString().getBytes(StandardCharsets.UTF_8));
      assertThat(late.status).as("a 400 after a megabyte went upstream").isEqualTo(400);
      assertThat(late.body).contains("malformed");

      Reply truncated = stack.send(PATH, "{\"model\":\"m\",\"kv_transfer_params\":".getBytes(StandardCharsets.UTF_8));
      assertThat(truncated.status).isEqualTo(400);
      assertThat(truncated.body).contains("truncated");

      assertThat(stack.upstream.complete(PATH)).as("no rejected body reached the upstream whole").isEmpty();
      // What did reach it (Envoy 1.40.0 had sent about a megabyte of the late one) was reset mid-body.
      assertThat(stack.upstream.requests).allSatisfy(r -> assertThat(r.complete()).isFalse());
      String metrics = Http.body(stack.service.adminUrl("/metrics"));
      assertThat(metrics)
          .contains("disagg_usage_edge_requests_total{outcome=\"rejected\"} 3.0")
          .contains("disagg_usage_edge_rejected_bodies_total{reason=\"malformed\"} 2.0");
    }
  }

  private static void assertStripped(Recorded got) {
    for (String name :
        List.of("x-disagg-phase", "x-disagg-request-id", "x-disagg-order", "epp-profile", "x-prefiller-host-port",
            "x-trtllm-msgpack")) {
      assertThat(got.headers).as(name).doesNotContainKey(name);
    }
    for (String header : CLIENT_HEADERS) {
      int colon = header.indexOf(':');
      assertThat(got.headers.get(header.substring(0, colon))).isEqualTo(header.substring(colon + 2));
    }
  }

  /** What the client read: status, headers (lower-case names) and body. */
  record Reply(int status, Map<String, String> headers, String body) {}

  /** One request as the upstream read it: headers with lower-case names, and whether its body ended. */
  record Recorded(String path, Map<String, String> headers, byte[] body, boolean complete) {
    String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }

  /** The orchestrator's place: records each request and answers {@code {"ok":true}}. */
  static final class RecordingUpstream implements AutoCloseable {
    private final List<Recorded> requests = Collections.synchronizedList(new ArrayList<>());
    private final LoopbackServer server = new LoopbackServer(this::record);

    int port() {
      return java.net.URI.create(server.baseUrl()).getPort();
    }

    private void record(HttpExchange exchange) throws IOException {
      Map<String, String> headers = new LinkedHashMap<>();
      exchange.getRequestHeaders().forEach((name, values) -> headers.put(name.toLowerCase(Locale.ROOT), String.join(",", values)));
      ByteArrayOutputStream body = new ByteArrayOutputStream();
      boolean complete = true;
      try (InputStream in = exchange.getRequestBody()) {
        in.transferTo(body);
      } catch (IOException reset) {
        complete = false; // Envoy reset the upstream request mid-body
      }
      requests.add(new Recorded(exchange.getRequestURI().getPath(), headers, body.toByteArray(), complete));
      if (!complete) {
        exchange.close();
        return;
      }
      byte[] answer = "{\"ok\":true}".getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().set("content-type", "application/json");
      exchange.sendResponseHeaders(200, answer.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(answer);
      }
    }

    /** The one complete request on {@code path}, taken (so a later request on it is the only one then). */
    Recorded only(String path) {
      List<Recorded> on = complete(path);
      assertThat(on).as("complete requests on " + path).hasSize(1);
      requests.remove(on.get(0));
      return on.get(0);
    }

    List<Recorded> complete(String path) {
      synchronized (requests) {
        return requests.stream().filter(r -> r.path().equals(path) && r.complete()).toList();
      }
    }

    @Override
    public void close() {
      server.close();
    }
  }

  /** The recording upstream behind the edge guard's front ({@link EdgeGuardFront}). */
  static final class Stack implements AutoCloseable {
    final RecordingUpstream upstream = new RecordingUpstream();
    final EdgeGuardFront front;
    final ServiceProcess service;
    final int listener;

    private Stack(String release) {
      front = EdgeGuardFront.start("edge-guard", release, upstream.port());
      service = front.guard;
      listener = front.listener;
    }

    static Stack start(String release) {
      return new Stack(release);
    }

    @Override
    public void close() {
      front.close();
      upstream.close();
    }

    /**
     * POSTs {@code body} with the forged and the client's own headers over a plain socket (HTTP/1.1,
     * {@code content-length}), writing on another thread so a reply that comes before the last byte is
     * read; returns what the client read up to Envoy's close.
     */
    Reply send(String path, byte[] body) throws Exception {
      try (Socket socket = new Socket("127.0.0.1", listener)) {
        socket.setSoTimeout(20_000);
        StringBuilder head = new StringBuilder("POST " + path + " HTTP/1.1\r\nhost: llm.example\r\nconnection: close\r\n");
        for (String header : FORGED_HEADERS) {
          head.append(header).append("\r\n");
        }
        for (String header : CLIENT_HEADERS) {
          head.append(header).append("\r\n");
        }
        head.append("content-length: ").append(body.length).append("\r\n\r\n");
        OutputStream out = socket.getOutputStream();
        CompletableFuture<Void> writing =
            CompletableFuture.runAsync(() -> {
              try {
                out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
                for (int from = 0; from < body.length; from += 16_384) {
                  out.write(body, from, Math.min(16_384, body.length - from));
                }
                out.flush();
              } catch (IOException closedEarly) {
                // Envoy answered and closed before the whole body was written
              }
            });
        byte[] response = socket.getInputStream().readAllBytes();
        writing.join();
        return parse(new String(response, StandardCharsets.UTF_8));
      }
    }

    private static Reply parse(String response) {
      int end = response.indexOf("\r\n\r\n");
      assertThat(end).as("a response: " + response).isPositive();
      String[] lines = response.substring(0, end).split("\r\n");
      Map<String, String> headers = new LinkedHashMap<>();
      for (int i = 1; i < lines.length; i++) {
        int colon = lines[i].indexOf(':');
        headers.put(lines[i].substring(0, colon).trim().toLowerCase(Locale.ROOT), lines[i].substring(colon + 1).trim());
      }
      return new Reply(Integer.parseInt(lines[0].split(" ")[1]), headers, response.substring(end + 4));
    }
  }
}
