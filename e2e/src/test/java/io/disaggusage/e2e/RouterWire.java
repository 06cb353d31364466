package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.simulation.workers.RecordedRequest;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/** What each router put on the wire to the workers, as the workers recorded it behind Envoy. */
final class RouterWire {
  private RouterWire() {}

  /**
   * sglang-router: the same body to both legs, with {@code bootstrap_host} the prefill pod, a
   * {@code bootstrap_room} per request, and the client's {@code max_tokens} renamed
   * {@code max_completion_tokens}.
   */
  static void assertSglang(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(bodies(prefills)).as("the same body on both legs").isEqualTo(bodies(decodes));
    for (RecordedRequest request : decodes) {
      JsonNode body = RouterClients.parseJson(request.bodyUtf8());
      assertThat(body.path("bootstrap_host").asText()).isEqualTo(RouterDeployment.PREFILL_POD);
      assertThat(body.has("bootstrap_room")).isTrue();
      assertThat(body.has("max_tokens")).as(request.bodyUtf8()).isFalse();
      assertThat(body.has("max_completion_tokens")).as(request.bodyUtf8()).isTrue();
    }
  }

  /**
   * vllm-router: sequential legs under one {@code X-Request-Id} naming both workers; the prefill leg
   * asks for one token without streaming and announces a remote decode, the decode leg carries the
   * prefill's {@code kv_transfer_params}.
   */
  static void assertVllm(RouterDeployment deployment) {
    List<RecordedRequest> prefills = deployment.prefill.log().completions();
    List<RecordedRequest> decodes = deployment.decode.log().completions();
    assertThat(prefills).hasSameSizeAs(decodes);
    for (int i = 0; i < prefills.size(); i++) {
      JsonNode prefill = RouterClients.parseJson(prefills.get(i).bodyUtf8());
      JsonNode decode = RouterClients.parseJson(decodes.get(i).bodyUtf8());
      assertThat(prefill.path("max_tokens").asInt()).isEqualTo(1);
      assertThat(prefill.path("stream").asBoolean(true)).isFalse();
      assertThat(prefill.path("kv_transfer_params").path("do_remote_decode").asBoolean()).isTrue();
      assertThat(decode.path("kv_transfer_params").isObject()).as(decodes.get(i).bodyUtf8()).isTrue();
      List<String> id = prefills.get(i).headerValues("x-request-id");
      assertThat(id).singleElement().satisfies(v -> assertThat(v).startsWith("___prefill_addr_"));
      assertThat(decodes.get(i).headerValues("x-request-id")).isEqualTo(id);
    }
  }

  private static Set<String> bodies(List<RecordedRequest> requests) {
    return requests.stream().map(RecordedRequest::bodyUtf8).collect(Collectors.toSet());
  }
}
