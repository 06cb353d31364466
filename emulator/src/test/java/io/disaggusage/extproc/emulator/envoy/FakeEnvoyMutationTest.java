package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.Chunking;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.append;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.mutate;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.pass;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.set;
import static io.disaggusage.extproc.emulator.envoy.ExtProcReplies.setValueOnly;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.MetadataOptions;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.type.v3.HttpStatus;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** Header mutations, CONTINUE_AND_REPLACE, ImmediateResponse, dynamic metadata (items 8–15). */
class FakeEnvoyMutationTest extends FakeEnvoyTestSupport {

  /** Answers request headers with the given mutation, everything else with no mutation. */
  private static ScriptedProcessor onRequestHeaders(Function<ProcessingRequest, ProcessingResponse> f) {
    return new ScriptedProcessor((req, s) -> s.reply(req.hasRequestHeaders() ? f.apply(req) : pass(req)));
  }

  @Test
  void removesBeforeSetsAndAppendAddsWhileUnsetAppendOverwrites() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> mutate(req, HeaderMutation.newBuilder()
        .addRemoveHeaders("x-a")
        .addSetHeaders(set("x-a", "new"))
        .addSetHeaders(set("x-b", "replaced"))
        .addSetHeaders(append("x-c", "second"))
        .addSetHeaders(set(":path", "/v1/rewritten"))
        .build()));
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}")
        .requestHeader("x-a", "old").requestHeader("x-b", "1").requestHeader("x-b", "2")
        .requestHeader("x-c", "first").build());

    HeaderList up = r.upstreamRequest().headers();
    assertThat(up.getAll("x-a")).containsExactly("new");
    assertThat(up.getAll("x-b")).containsExactly("replaced");
    assertThat(up.getAll("x-c")).containsExactly("first", "second");
    assertThat(up.get(":path")).contains("/v1/rewritten");
    assertThat(r.stats().rejectedHeaderMutations()).isZero();
  }

  @Test
  void protectedHeadersAreIgnoredAndCounted() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> mutate(req, HeaderMutation.newBuilder()
        .addSetHeaders(set("host", "evil"))
        .addSetHeaders(set(":authority", "evil"))
        .addSetHeaders(set(":method", "DELETE"))
        .addSetHeaders(set(":scheme", "https"))
        .addSetHeaders(set("x-envoy-upstream-rq-timeout-ms", "1"))
        .addSetHeaders(append(":path", "/x"))
        .addRemoveHeaders(":path")
        .addRemoveHeaders("host")
        .build()));
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").authority("llm.local").build());

    HeaderList up = r.upstreamRequest().headers();
    assertThat(up.get(":authority")).contains("llm.local");
    assertThat(up.get(":method")).contains("POST");
    assertThat(up.get(":scheme")).contains("http");
    assertThat(up.getAll(":path")).containsExactly("/v1/completions");
    assertThat(up.contains("x-envoy-upstream-rq-timeout-ms")).isFalse();
    assertThat(up.contains("host")).isFalse();
    assertThat(r.stats().rejectedHeaderMutations()).isEqualTo(8);
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  @Test
  void statusCanBeRewrittenInResponseHeadersReply() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> s.reply(req.hasResponseHeaders()
        ? mutate(req, HeaderMutation.newBuilder().addSetHeaders(set(":status", "202"))
            .addSetHeaders(set("x-rewritten", "yes")).build())
        : pass(req)));
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    assertThat(r.clientResponse().status()).isEqualTo(202);
    assertThat(r.clientResponse().header("x-rewritten")).contains("yes");
  }

  @Test
  void valueOnlyHeaderBecomesAnEmptyHeader() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> mutate(req, HeaderMutation.newBuilder()
        .addSetHeaders(setValueOnly("x-disagg-phase", "generation")).build()));
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    assertThat(r.upstreamRequest().headers().get("x-disagg-phase")).contains("");
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  @Test
  void valueAndRawValueTogetherIsA500EvenWhenFailOpen() throws Exception {
    HeaderValueOption both = HeaderValueOption.newBuilder().setHeader(HeaderValue.newBuilder()
        .setKey("x-both").setValue("a").setRawValue(ByteString.copyFromUtf8("a"))).build();
    ScriptedProcessor server = onRequestHeaders(req -> mutate(req,
        HeaderMutation.newBuilder().addSetHeaders(both).build()));
    FakeEnvoy envoy = envoy(server, baseline().setFailureModeAllow(true).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    assertThat(r.clientResponse().status()).isEqualTo(500);
    assertThat(r.clientResponse().responseCodeDetails())
        .startsWith("Only_one_of_value_or_raw_value_in_the_HeaderValue_message_should_be_set");
    assertThat(r.upstreamRequest().reached()).isFalse();
    assertThat(r.streamEnd()).isEqualTo(ExchangeResult.StreamEnd.CLOSED_BY_ENVOY);
  }

  @Test
  void invalidHeaderValueIsA500() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> mutate(req,
        HeaderMutation.newBuilder().addSetHeaders(set("x-bad", "a\r\nb")).build()));
    FakeEnvoy envoy = envoy(server, baseline().setFailureModeAllow(true).build(), EnvoyProfile.V1_37);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    assertThat(r.clientResponse().status()).isEqualTo(500);
    assertThat(r.clientResponse().localReply()).isPresent();
  }

  @Test
  void continueAndReplaceReplacesTheBodyAndStopsBodyMessages() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> ExtProcReplies.reply(req, CommonResponse.newBuilder()
            .setStatus(CommonResponse.ResponseStatus.CONTINUE_AND_REPLACE)
            .setHeaderMutation(HeaderMutation.newBuilder().addSetHeaders(set(":method", "PUT")))
            .setBodyMutation(BodyMutation.newBuilder().setBody(ByteString.copyFromUtf8("{\"new\":true}")))
            .build())
        .build());
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.STREAMED, BodySendMode.NONE).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{\"old\":1}")
        .requestChunking(Chunking.bytewise()).build());

    assertThat(r.upstreamRequest().bodyUtf8()).isEqualTo("{\"new\":true}");
    assertThat(r.upstreamRequest().headers().contains("content-length")).isFalse();
    assertThat(r.upstreamRequest().headers().get(":method")).contains("PUT");
    assertThat(r.messagesSent().stream().noneMatch(ProcessingRequest::hasRequestBody)).isTrue();
    assertThat(r.clientResponse().status()).isEqualTo(200);
  }

  @Test
  void immediateResponseIsALocalReplyAndTheUpstreamIsNeverReached() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> ProcessingResponse.newBuilder()
        .setImmediateResponse(ImmediateResponse.newBuilder()
            .setStatus(HttpStatus.newBuilder().setCodeValue(403))
            .setBody(ByteString.copyFromUtf8("denied"))
            .setHeaders(HeaderMutation.newBuilder().addSetHeaders(set("x-reason", "policy")))
            .setDetails("blocked by policy"))
        .build());
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").build());

    ClientResponse c = r.clientResponse();
    assertThat(c.status()).isEqualTo(403);
    assertThat(c.bodyUtf8()).isEqualTo("denied");
    assertThat(c.header("x-reason")).contains("policy");
    assertThat(c.header("content-type")).contains("text/plain");
    assertThat(c.responseCodeDetails()).isEqualTo("blocked_by_policy");
    assertThat(r.upstreamRequest().reached()).isFalse();
    assertThat(r.messagesSent()).hasSize(1);
  }

  @Test
  void immediateResponseWithoutStatusIs200() throws Exception {
    ScriptedProcessor server = onRequestHeaders(req -> ProcessingResponse.newBuilder()
        .setImmediateResponse(ImmediateResponse.newBuilder().setStatus(HttpStatus.newBuilder().setCodeValue(100)))
        .build());
    FakeEnvoy envoy = envoy(server, baseline().build(), EnvoyProfile.V1_36);

    assertThat(envoy.execute(Exchange.post("/x", "{}").build()).clientResponse().status()).isEqualTo(200);
  }

  @Test
  void immediateResponseAfterDownstreamHeadersResetsTheStream() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> s.reply(req.hasResponseBody()
        ? ProcessingResponse.newBuilder().setImmediateResponse(ImmediateResponse.newBuilder()
            .setStatus(HttpStatus.newBuilder().setCodeValue(500))).build()
        : pass(req)));
    FakeEnvoy envoy = envoy(server,
        withModes(BodySendMode.NONE, BodySendMode.STREAMED).build(), EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}").responseBody("data").build());

    assertThat(r.clientResponse().reset()).isTrue();
    assertThat(r.clientResponse().status()).isEqualTo(200);
    assertThat(r.clientResponse().complete()).isFalse();
    assertThat(r.clientResponse().body()).isEmpty();
  }

  @Test
  void dynamicMetadataOnlyForReceivingNamespacesAndMerged() throws Exception {
    ScriptedProcessor server = new ScriptedProcessor((req, s) -> {
      Struct.Builder md = Struct.newBuilder();
      if (req.hasRequestHeaders()) {
        md.putFields("disagg_usage", structValue("outcome", Value.newBuilder().setStringValue("pending").build()));
        md.putFields("other_ns", structValue("leak", Value.newBuilder().setBoolValue(true).build()));
      } else {
        md.putFields("disagg_usage", structValue("cached_tokens", Value.newBuilder().setNumberValue(0).build()));
      }
      s.reply(pass(req).toBuilder().setDynamicMetadata(md).build());
    });
    ExternalProcessor config = baseline()
        .setMetadataOptions(MetadataOptions.newBuilder()
            .setReceivingNamespaces(MetadataOptions.MetadataNamespaces.newBuilder().addUntyped("disagg_usage"))
            .setForwardingNamespaces(MetadataOptions.MetadataNamespaces.newBuilder().addUntyped("routing")))
        .build();
    FakeEnvoy envoy = envoy(server, config, EnvoyProfile.V1_36);

    ExchangeResult r = envoy.execute(Exchange.post("/v1/completions", "{}")
        .dynamicMetadata("routing", Struct.newBuilder()
            .putFields("pool", Value.newBuilder().setStringValue("gen").build()).build())
        .build());

    assertThat(r.dynamicMetadata()).containsKeys("disagg_usage", "routing").doesNotContainKey("other_ns");
    assertThat(r.accessLog("%DYNAMIC_METADATA(disagg_usage:cached_tokens)% %DYNAMIC_METADATA(disagg_usage:outcome)%"
        + " %DYNAMIC_METADATA(other_ns:leak)%")).isEqualTo("0 pending -");
    assertThat(r.messagesSent()).allSatisfy(m ->
        assertThat(m.getMetadataContext().getFilterMetadataOrThrow("routing")
            .getFieldsOrThrow("pool").getStringValue()).isEqualTo("gen"));
  }

  private static Value structValue(String key, Value v) {
    return Value.newBuilder().setStructValue(Struct.newBuilder().putFields(key, v)).build();
  }
}
