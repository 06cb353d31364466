package io.disaggusage.extproc.edgeguard;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.edge.MemberRemoval;
import io.disaggusage.extproc.edge.MemberRemover;
import io.disaggusage.extproc.edge.Rejection;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.HeaderList;
import io.disaggusage.extproc.metrics.EdgeGuardMetrics.Outcome;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/**
 * The edge guard through the fake Envoy with the shipped edge filter: what the upstream (the
 * orchestrator) receives, what the client gets, and what is counted.
 */
class EdgeGuardTest {
  static final String PATH = "/v1/chat/completions";
  static final String FORGED =
      "{\"model\":\"m\",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_host\":\"10.0.0.9\"},"
          + "\"messages\":[{\"role\":\"user\",\"content\":\"hi, \\\"kv_transfer_params\\\": {}\"}],"
          + "\"vllm_xargs\":{\"kv_transfer_params\":{\"x\":1},\"seed\":3},\"bootstrap_room\":42,\"stream\":true}";
  static final String CLEANED =
      "{\"model\":\"m\","
          + "\"messages\":[{\"role\":\"user\",\"content\":\"hi, \\\"kv_transfer_params\\\": {}\"}],"
          + "\"vllm_xargs\":{\"seed\":3},\"stream\":true}";

  static Exchange.Builder forged(String path, String body) {
    return Exchange.post(path, body)
        .requestHeader("x-disagg-phase", "context")
        .requestHeader("x-disagg-request-id", "victim")
        .requestHeader("x-disagg-anything", "1")
        .requestHeader("epp-profile", "pd")
        .requestHeader("x-prefiller-host-port", "10.0.0.9:8000")
        .requestHeader("x-trtllm-msgpack", "1")
        .requestHeader("authorization", "Bearer k")
        .requestHeader("x-request-id", "client-id");
  }

  private static void assertHeadersStripped(HeaderList upstream) {
    for (String name :
        List.of("x-disagg-phase", "x-disagg-request-id", "x-disagg-anything", "epp-profile",
            "x-prefiller-host-port", "x-trtllm-msgpack")) {
      assertThat(upstream.contains(name)).as(name).isFalse();
    }
    assertThat(upstream.get("authorization")).contains("Bearer k");
    assertThat(upstream.get("x-request-id")).contains("client-id");
    assertThat(upstream.get("content-type")).contains("application/json");
  }

  @ParameterizedTest
  @EnumSource(EnvoyProfile.class)
  void aForgedRequestReachesTheUpstreamWithoutWhatOnlyTheMachineryMaySet(EnvoyProfile profile) throws Exception {
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest(profile)) {
      ExchangeResult result = guard.run(forged(PATH, FORGED).responseBody("{\"ok\":true}"));
      assertThat(result.problems()).isEmpty();
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo(CLEANED);
      assertThat(result.upstreamRequest().complete()).isTrue();
      assertHeadersStripped(result.upstreamRequest().headers());
      // Streamed and shortened: the client's content-length must not reach the upstream.
      assertThat(result.upstreamRequest().headers().contains("content-length")).isFalse();
      assertThat(result.upstreamRequest().contentLengthMismatch()).isFalse();
      assertThat(result.clientResponse().status()).isEqualTo(200);
      assertThat(result.clientResponse().bodyUtf8()).isEqualTo("{\"ok\":true}");

      assertThat(guard.edge.requestCount(Outcome.STRIPPED)).isEqualTo(1);
      assertThat(guard.edge.removedMemberCount("kv_transfer_params")).isEqualTo(1);
      assertThat(guard.edge.removedMemberCount("vllm_xargs.kv_transfer_params")).isEqualTo(1);
      assertThat(guard.edge.removedMemberCount("bootstrap_room")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("x-disagg-phase")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("x-disagg-request-id")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("x-disagg-*")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("epp-profile")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("x-trtllm-msgpack")).isEqualTo(1);
      assertThat(guard.edge.removedHeaderCount("x-prefiller-host-port")).isEqualTo(1);
    }
  }

  @Test
  void everyChunkingGivesTheUpstreamTheSameBytes() throws Exception {
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      int runs = 0;
      for (int size = 1; size <= FORGED.length(); size += size < 16 ? 1 : 7) {
        ExchangeResult result = guard.run(forged(PATH, FORGED).requestChunking(Chunking.fixed(size)));
        assertThat(result.problems()).as("chunks of %d", size).isEmpty();
        assertThat(result.upstreamRequest().bodyUtf8()).as("chunks of %d", size).isEqualTo(CLEANED);
        runs++;
      }
      ExchangeResult bytewise = guard.run(forged(PATH, FORGED).requestChunking(Chunking.bytewise()));
      assertThat(bytewise.upstreamRequest().bodyUtf8()).isEqualTo(CLEANED);
      assertThat(guard.edge.requestCount(Outcome.STRIPPED)).isEqualTo(runs + 1);
      assertThat(guard.edge.removedMemberCount("kv_transfer_params")).isEqualTo(runs + 1);
    }
  }

  @Test
  void aCleanRequestIsForwardedByteForByteAndCountedClean() throws Exception {
    String body = "{ \"model\" : \"m\", \"messages\": [ {\"role\":\"user\", \"content\":\"\\u00e9 NaN\"} ], \"t\": 1.50E+0 }";
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      ExchangeResult result = guard.run(Exchange.post(PATH, body).requestChunking(Chunking.fixed(5)));
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo(body);
      assertThat(result.upstreamRequest().headers().contains("content-length")).isFalse();
      assertThat(guard.edge.requestCount(Outcome.CLEAN)).isEqualTo(1);
      assertThat(guard.edge.requestCount(Outcome.STRIPPED)).isZero();
    }
  }

  @Test
  void otherPathsLoseTheHeadersOnlyAndKeepTheirBodyAndLength() throws Exception {
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      ExchangeResult post = guard.run(forged("/v1/embeddings", FORGED));
      assertThat(post.upstreamRequest().bodyUtf8()).isEqualTo(FORGED);
      assertThat(post.upstreamRequest().headers().get("content-length")).contains(String.valueOf(FORGED.length()));
      assertHeadersStripped(post.upstreamRequest().headers());
      assertThat(post.messagesSent()).noneMatch(m -> m.hasRequestBody() || m.hasResponseHeaders());

      ExchangeResult get =
          guard.run(Exchange.builder().method("GET").path("/v1/models").requestHeader("x-disagg-order", "x"));
      assertThat(get.upstreamRequest().headers().contains("x-disagg-order")).isFalse();
      assertThat(guard.edge.requestCount(Outcome.STRIPPED)).isEqualTo(2);
      assertThat(guard.edge.removedHeaderCount("x-disagg-order")).isEqualTo(1);

      ExchangeResult plain = guard.run(Exchange.builder().method("GET").path("/health"));
      assertThat(plain.upstreamRequest().reached()).isTrue();
      assertThat(guard.edge.requestCount(Outcome.CLEAN)).isEqualTo(1);
    }
  }

  @Test
  void aBodyThatIsNotOneJsonObjectIsAnswered400AndNeverReachesTheUpstreamWhole() throws Exception {
    Map<String, Rejection> bodies =
        Map.of(
            "{\"model\":\"m\",\"a\":1 \"kv_transfer_params\":{\"do_remote_prefill\":true}}", Rejection.MALFORMED,
            "{\"model\":\"m\"} {\"kv_transfer_params\":1}", Rejection.MALFORMED,
            "[{\"kv_transfer_params\":1}]", Rejection.NOT_AN_OBJECT,
            "{\"model\":\"m\",\"kv_transfer_params\":{\"x\":", Rejection.TRUNCATED);
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      int rejected = 0;
      for (Map.Entry<String, Rejection> body : bodies.entrySet()) {
        for (Chunking chunking : List.of(Chunking.whole(), Chunking.fixed(7), Chunking.bytewise())) {
          ExchangeResult result = guard.run(forged(PATH, body.getKey()).requestChunking(chunking));
          String context = body.getKey() + " " + chunking;
          assertThat(result.clientResponse().status()).as(context).isEqualTo(400);
          assertThat(result.clientResponse().localReply()).as(context).isPresent();
          assertThat(result.clientResponse().responseCodeDetails()).isEqualTo("edge_guard_" + body.getValue().label());
          assertThat(result.clientResponse().header("content-type")).contains("application/json");
          assertThat(result.clientResponse().bodyUtf8()).contains("invalid_request_error").doesNotContain("kv_transfer");
          assertThat(result.upstreamRequest().complete()).as(context).isFalse();
          assertThat(result.upstreamRequest().bodyUtf8()).as(context).doesNotContain("kv_transfer_params");
          rejected++;
        }
        assertThat(guard.edge.rejectedCount(body.getValue())).isPositive();
      }
      assertThat(guard.edge.requestCount(Outcome.REJECTED)).isEqualTo(rejected);
      assertThat(guard.edge.requestCount(Outcome.STRIPPED)).isZero();
      // Every stream ends (Envoy cancels it after the local reply; that lands a moment after the client has it).
      long deadline = System.nanoTime() + 5_000_000_000L;
      while (guard.metrics.activeStreams() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertThat(guard.metrics.activeStreams()).isZero();
    }
  }

  @Test
  void aBodyEndingWithTrailersIsCheckedAtTheTrailers() throws Exception {
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      ExchangeResult whole =
          guard.run(forged(PATH, FORGED).requestTrailer("x-checksum", "1").requestChunking(Chunking.fixed(20)));
      assertThat(whole.upstreamRequest().bodyUtf8()).isEqualTo(CLEANED);
      assertThat(whole.upstreamRequest().trailers().get("x-checksum")).contains("1");

      ExchangeResult cut =
          guard.run(forged(PATH, "{\"model\":\"m\",").requestTrailer("x-checksum", "1"));
      assertThat(cut.clientResponse().status()).isEqualTo(400);
      assertThat(guard.edge.rejectedCount(Rejection.TRUNCATED)).isEqualTo(1);
    }
  }

  @Test
  void configuredHeadersAndMembersReplaceTheDefaults() throws Exception {
    try (EdgeGuardUnderTest guard =
        new EdgeGuardUnderTest("edge_guard.remove_headers=x-tenant-override", "edge_guard.remove_members=a.b,bootstrap_room")) {
      ExchangeResult result =
          guard.run(
              forged(PATH, "{\"a\":{\"b\":1,\"c\":2},\"kv_transfer_params\":{},\"bootstrap_room\":3}")
                  .requestHeader("x-tenant-override", "t"));
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo("{\"a\":{\"c\":2},\"kv_transfer_params\":{}}");
      HeaderList upstream = result.upstreamRequest().headers();
      assertThat(upstream.contains("x-tenant-override")).isFalse();
      assertThat(upstream.contains("x-disagg-phase")).isFalse(); // the family always goes
      assertThat(upstream.get("epp-profile")).contains("pd"); // no longer listed
      assertThat(guard.edge.removedHeaderCount("x-tenant-override")).isEqualTo(1);
      assertThat(guard.edge.removedMemberCount("a.b")).isEqualTo(1);
    }
  }

  @Test
  void withNoMembersListedBodiesAreNotReadAndKeepTheirLength() throws Exception {
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest("edge_guard.remove_members=")) {
      ExchangeResult result = guard.run(forged(PATH, FORGED));
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo(FORGED);
      assertThat(result.upstreamRequest().headers().get("content-length")).contains(String.valueOf(FORGED.length()));
      assertHeadersStripped(result.upstreamRequest().headers());
    }
  }

  @Test
  void theWarmUpReadsBodiesWithEveryRemovedPath() {
    MemberRemoval removal = MemberRemoval.defaults();
    MemberRemover remover = removal.start();
    remover.accept(EdgeGuardWarmup.body(removal), true);
    assertThat(remover.complete()).isTrue();
    assertThat(remover.removed().keySet()).containsExactlyInAnyOrderElementsOf(removal.paths().paths());
    assertThat(EdgeGuardWarmup.run(removal, java.time.Duration.ofMillis(50))).isBetween(1, EdgeGuardWarmup.MAX_ROUNDS);
  }

  @Test
  void aMegabyteBodyStreamsThrough() throws Exception {
    StringBuilder body = new StringBuilder("{\"model\":\"m\",\"messages\":[");
    for (int i = 0; i < 30_000; i++) {
      body.append(i == 0 ? "" : ",").append("{\"role\":\"user\",\"content\":\"line ").append(i).append("\"}");
    }
    String tail = ",\"kv_transfer_params\":{\"do_remote_decode\":true}}";
    String request = body + "]" + tail;
    try (EdgeGuardUnderTest guard = new EdgeGuardUnderTest()) {
      ExchangeResult result = guard.run(forged(PATH, request).requestChunking(Chunking.fixed(65_536)));
      assertThat(request.length()).isGreaterThan(1 << 20);
      assertThat(result.upstreamRequest().bodyUtf8()).isEqualTo(body + "]}");
    }
  }
}
