package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.e2e.RouterWire.Legs;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import java.util.Iterator;
import java.util.List;

/**
 * What pd-sidecar v0.7.1 (NIXL v2) put on the wire to the workers, as they recorded it: per exchange a
 * prefill leg capped to one token, not streamed, announcing a remote decode, and a decode leg with the
 * client's body plus the prefill's {@code kv_transfer_params}; both re-serialised with sorted keys; both
 * with the same {@code X-Request-Id} values (a version-1 uuid, after the client's own when it sent one).
 */
final class LlmdWire {
  /** pd-sidecar's id: {@code uuid.NewUUID()}, a version-1 (time-based) UUID. */
  static final String UUID_V1 = "[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

  private LlmdWire() {}

  /** Every prefill leg {@code prefill} received, with the decode leg that carried the same X-Request-Id values. */
  static List<Legs> legs(EngineWorker prefill, EngineWorker decode) {
    return RouterWire.legs(prefill, decode, RouterWire::requestIds);
  }

  /** The two legs of an exchange whose client sent {@code clientBody}. */
  static void assertNixlV2(Legs legs, String clientBody) {
    JsonNode prefill = RouterClients.parseJson(legs.prefill().bodyUtf8());
    JsonNode decode = RouterClients.parseJson(legs.decode().bodyUtf8());
    assertThat(prefill.path("max_tokens").asInt()).as(legs.prefill().bodyUtf8()).isEqualTo(1);
    assertThat(prefill.path("max_completion_tokens").asInt()).as("added though the client sent none").isEqualTo(1);
    assertThat(prefill.path("stream").isBoolean() && !prefill.path("stream").asBoolean()).isTrue();
    assertThat(prefill.has("stream_options")).isFalse();
    JsonNode announce = prefill.path("kv_transfer_params");
    assertThat(announce.path("do_remote_decode").asBoolean()).isTrue();
    assertThat(announce.path("do_remote_prefill").isBoolean() && !announce.path("do_remote_prefill").asBoolean()).isTrue();
    for (String nulled : List.of("remote_engine_id", "remote_block_ids", "remote_host", "remote_port")) {
      assertThat(announce.path(nulled).isNull()).as(nulled).isTrue();
    }
    assertThat(decode.path("kv_transfer_params").path("do_remote_prefill").asBoolean())
        .as("the prefill's kv_transfer_params carried to the decode").isTrue();
    ObjectNode decodeWithoutHandoff = decode.deepCopy();
    decodeWithoutHandoff.remove("kv_transfer_params");
    assertThat(decodeWithoutHandoff).as("otherwise the client's body").isEqualTo(RouterClients.parseJson(clientBody));
    assertSortedKeys(prefill);
    assertSortedKeys(decode);
    assertThat(legs.decode().headerValues("x-request-id")).as("the same ids on both legs").isEqualTo(legs.requestIds());
    assertThat(legs.prefill().headerValues("x-prefiller-host-port")).as("the EPP's header is passed on").hasSize(1);
  }

  /** Go's encoding/json writes a map's keys sorted, at every level. */
  static void assertSortedKeys(JsonNode node) {
    if (node.isObject()) {
      String previous = null;
      for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
        String name = names.next();
        assertThat(previous == null || previous.compareTo(name) < 0).as("keys sorted in " + node).isTrue();
        previous = name;
        assertSortedKeys(node.get(name));
      }
    } else if (node.isArray()) {
      node.forEach(LlmdWire::assertSortedKeys);
    }
  }
}
