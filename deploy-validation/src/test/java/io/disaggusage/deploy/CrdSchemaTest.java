package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * EnvoyFilter and EnvoyExtensionPolicy objects (every one under istio/ and deploy/) against the real
 * CRD schemas from ../shared/schemas, strictified so that unknown fields fail.
 */
class CrdSchemaTest {

  static CrdSchemas.Validator validator(String kind) {
    var v = CrdSchemas.forKind(kind);
    Assumptions.assumeTrue(v.isPresent(), "../shared/schemas not present: CRD schema validation skipped");
    return v.get();
  }

  static JsonNode first(String kind) {
    List<Manifests.Doc> docs = Manifests.objectsOfKind(kind);
    assertThat(docs).as(kind + " objects").isNotEmpty();
    return docs.get(0).node();
  }

  /** A copy of the first shipped object of {@code kind}, to break. */
  static ObjectNode copyOfFirst(String kind) {
    return (ObjectNode) first(kind).deepCopy();
  }

  /** Asserts that {@code validator} rejects {@code object} with a problem that names every one of {@code fragments}. */
  static void assertRejected(CrdSchemas.Validator validator, JsonNode object, String... fragments) {
    assertThat(validator.validate(object)).anySatisfy(problem -> assertThat(problem).contains(fragments));
  }

  @Test
  void strictifyClosesObjectSchemasButNotOpenOnes() throws Exception {
    JsonNode schema = YamlDocuments.YAML.readTree("""
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
              list: {type: array, items: {type: object, properties: {b: {type: integer}}}}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {c: {type: string}}}
              map: {type: object, additionalProperties: {type: object, properties: {d: {type: string}}}}
              either: {type: object, oneOf: [{properties: {e: {type: string}}}]}
        """);
    assertThat(CrdSchemas.strictify(schema)).isEqualTo(4);
    assertThat(schema.at("/additionalProperties").asBoolean(true)).isFalse();
    assertThat(schema.at("/properties/spec/additionalProperties").asBoolean(true)).isFalse();
    assertThat(schema.at("/properties/spec/properties/list/items/additionalProperties").asBoolean(true)).isFalse();
    assertThat(schema.at("/properties/spec/properties/map/additionalProperties/additionalProperties").asBoolean(true)).isFalse();
    assertThat(schema.at("/properties/spec/properties/free").has("additionalProperties")).isFalse();
    assertThat(schema.at("/properties/spec/properties/either/oneOf/0").has("additionalProperties")).isFalse();
  }

  /** Every object of {@code kind} (Istio's EnvoyFilter, Envoy Gateway's EnvoyExtensionPolicy) against its CRD. */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"EnvoyFilter, 3", "EnvoyExtensionPolicy, 2"})
  void everyObjectOfTheKindMatchesItsCrd(String kind, int atLeast) {
    CrdSchemas.Validator v = validator(kind);
    List<Manifests.Doc> docs = Manifests.objectsOfKind(kind);
    assertThat(docs).hasSizeGreaterThanOrEqualTo(atLeast);
    for (Manifests.Doc d : docs) {
      assertThat(v.validate(d.node())).as(d.toString()).isEmpty();
    }
  }

  /**
   * The other Envoy Gateway objects under deploy/envoy-gateway/ (the request-id ClientTrafficPolicy, the
   * EnvoyPatchPolicy, the EnvoyProxies, the sidecar's Backend) against Envoy Gateway's own CRDs of the
   * pinned release.
   */
  @Test
  void everyOtherEnvoyGatewayObjectMatchesItsCrd() {
    int checked = 0;
    for (String kind : CrdSchemas.ENVOY_GATEWAY_FILES.keySet()) {
      CrdSchemas.Validator v = CrdSchemas.envoyGatewayKind(kind);
      for (Manifests.Doc d : Manifests.objectsOfKind(kind)) {
        assertThat(v.validate(d.node())).as(d.toString()).isEmpty();
        checked++;
      }
    }
    assertThat(checked).as("ClientTrafficPolicy, EnvoyPatchPolicy, EnvoyProxy and Backend objects").isGreaterThanOrEqualTo(5);
  }

  @Test
  void patchValueIsLeftToTheEnvoyProtoCheck() {
    // patch.value is x-kubernetes-preserve-unknown-fields: the schema cannot see typos there, which is
    // why IstioEnvoyFilterTest parses every value into Envoy's protos.
    CrdSchemas.Validator v = validator("EnvoyFilter");
    ObjectNode f = copyOfFirst("EnvoyFilter");
    ((ObjectNode) f.at("/spec/configPatches/0/patch/value")).put("failure_mode_alow", true);
    assertThat(v.validate(f)).isEmpty();
  }

  /**
   * A copy of a shipped object broken one way: the CRD schema of its kind (Istio's, or Envoy Gateway's
   * own) names what is wrong.
   */
  @ParameterizedTest(name = "{1}: {0}")
  @MethodSource("brokenObjects")
  void aBrokenObjectIsRejected(String caseName, String kind, Consumer<ObjectNode> breakIt, List<String> named) {
    CrdSchemas.Validator v =
        CrdSchemas.ENVOY_GATEWAY_FILES.containsKey(kind) ? CrdSchemas.envoyGatewayKind(kind) : validator(kind);
    ObjectNode object = copyOfFirst(kind);
    breakIt.accept(object);
    assertRejected(v, object, named.toArray(String[]::new));
  }

  static Stream<Arguments> brokenObjects() {
    Consumer<ObjectNode> requestIdTypo = o -> {
      ObjectNode headers = (ObjectNode) o.at("/spec/headers");
      headers.set("requestId", headers.remove("requestID"));
    };
    Consumer<ObjectNode> envoyFilterTypo = o -> {
      ObjectNode spec = (ObjectNode) o.get("spec");
      JsonNode selection = spec.has("workloadSelector") ? spec.remove("workloadSelector") : spec.remove("targetRefs");
      spec.set("workloadSelecter", selection);
    };
    Consumer<ObjectNode> failOpenTypo = o -> {
      ObjectNode extProc = (ObjectNode) o.at("/spec/extProc/0");
      extProc.set("failopen", extProc.remove("failOpen"));
    };
    return Stream.of(
        broken("a misspelled field", "ClientTrafficPolicy", requestIdTypo, "requestId"),
        broken("a bad request-id action", "ClientTrafficPolicy",
            o -> ((ObjectNode) o.at("/spec/headers")).put("requestID", "Preserve-Or-Generate"),
            "/spec/headers/requestID", "enumeration"),
        broken("a bad patch operation", "EnvoyPatchPolicy",
            o -> ((ObjectNode) o.at("/spec/jsonPatches/0/operation")).put("op", "merge"),
            "/spec/jsonPatches/0/operation/op", "enumeration"),
        broken("a bad patch type", "EnvoyPatchPolicy",
            o -> ((ObjectNode) o.at("/spec/jsonPatches/0")).put("type", "type.googleapis.com/envoy.config.listener.v3.Listeners"),
            "/spec/jsonPatches/0/type", "enumeration"),
        broken("a misspelled field", "EnvoyFilter", envoyFilterTypo, "workloadSelecter"),
        broken("a bad enum value", "EnvoyFilter",
            o -> ((ObjectNode) o.at("/spec/configPatches/0/match")).put("context", "SIDECAR_IN"), "SIDECAR_IN", "enum"),
        broken("an apiVersion not served", "EnvoyFilter",
            o -> o.put("apiVersion", "networking.istio.io/v1alpha2"), "not served"),
        broken("a misspelled field", "EnvoyExtensionPolicy", failOpenTypo, "failopen"),
        broken("a bad body mode", "EnvoyExtensionPolicy",
            o -> ((ObjectNode) o.at("/spec/extProc/0/processingMode/request")).put("body", "Stream"), "Stream", "enum"),
        broken("a bad duration", "EnvoyExtensionPolicy",
            o -> ((ObjectNode) o.at("/spec/extProc/0")).put("messageTimeout", "0.2s"), "messageTimeout"));
  }

  private static Arguments broken(String caseName, String kind, Consumer<ObjectNode> breakIt, String... named) {
    return Arguments.of(caseName, kind, breakIt, List.of(named));
  }
}
