package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

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
  void misspelledOrBadRequestIdAndPatchFieldsAreRejected() {
    CrdSchemas.Validator ctp = CrdSchemas.envoyGatewayKind("ClientTrafficPolicy");
    ObjectNode typo = (ObjectNode) first("ClientTrafficPolicy").deepCopy();
    ObjectNode headers = (ObjectNode) typo.at("/spec/headers");
    headers.set("requestId", headers.remove("requestID"));
    assertThat(ctp.validate(typo)).anySatisfy(p -> assertThat(p).contains("requestId"));
    ObjectNode badAction = (ObjectNode) first("ClientTrafficPolicy").deepCopy();
    ((ObjectNode) badAction.at("/spec/headers")).put("requestID", "Preserve-Or-Generate");
    assertThat(ctp.validate(badAction)).anySatisfy(p -> assertThat(p).contains("/spec/headers/requestID").contains("enumeration"));

    CrdSchemas.Validator epp = CrdSchemas.envoyGatewayKind("EnvoyPatchPolicy");
    ObjectNode badOp = (ObjectNode) first("EnvoyPatchPolicy").deepCopy();
    ((ObjectNode) badOp.at("/spec/jsonPatches/0/operation")).put("op", "merge");
    assertThat(epp.validate(badOp)).anySatisfy(p -> assertThat(p).contains("/spec/jsonPatches/0/operation/op").contains("enumeration"));
    ObjectNode badType = (ObjectNode) first("EnvoyPatchPolicy").deepCopy();
    ((ObjectNode) badType.at("/spec/jsonPatches/0")).put("type", "type.googleapis.com/envoy.config.listener.v3.Listeners");
    assertThat(epp.validate(badType)).anySatisfy(p -> assertThat(p).contains("/spec/jsonPatches/0/type").contains("enumeration"));
  }

  @Test
  void misspelledEnvoyFilterFieldIsRejected() {
    CrdSchemas.Validator v = validator("EnvoyFilter");
    ObjectNode f = (ObjectNode) first("EnvoyFilter").deepCopy();
    ObjectNode spec = (ObjectNode) f.get("spec");
    JsonNode selection = spec.has("workloadSelector") ? spec.remove("workloadSelector") : spec.remove("targetRefs");
    spec.set("workloadSelecter", selection);
    assertThat(v.validate(f)).anySatisfy(p -> assertThat(p).contains("workloadSelecter"));
  }

  @Test
  void badEnvoyFilterEnumIsRejected() {
    CrdSchemas.Validator v = validator("EnvoyFilter");
    ObjectNode f = (ObjectNode) first("EnvoyFilter").deepCopy();
    ((ObjectNode) f.at("/spec/configPatches/0/match")).put("context", "SIDECAR_IN");
    assertThat(v.validate(f)).anySatisfy(p -> assertThat(p).contains("SIDECAR_IN").contains("enum"));
  }

  @Test
  void wrongApiVersionIsRejected() {
    CrdSchemas.Validator v = validator("EnvoyFilter");
    ObjectNode f = (ObjectNode) first("EnvoyFilter").deepCopy();
    f.put("apiVersion", "networking.istio.io/v1alpha2");
    assertThat(v.validate(f)).anySatisfy(p -> assertThat(p).contains("not served"));
  }

  @Test
  void patchValueIsLeftToTheEnvoyProtoCheck() {
    // patch.value is x-kubernetes-preserve-unknown-fields: the schema cannot see typos there, which is
    // why IstioEnvoyFilterTest parses every value into Envoy's protos.
    CrdSchemas.Validator v = validator("EnvoyFilter");
    ObjectNode f = (ObjectNode) first("EnvoyFilter").deepCopy();
    ((ObjectNode) f.at("/spec/configPatches/0/patch/value")).put("failure_mode_alow", true);
    assertThat(v.validate(f)).isEmpty();
  }

  @Test
  void misspelledOrBadEnvoyExtensionPolicyFieldsAreRejected() {
    CrdSchemas.Validator v = validator("EnvoyExtensionPolicy");
    ObjectNode typo = (ObjectNode) first("EnvoyExtensionPolicy").deepCopy();
    ObjectNode extProc = (ObjectNode) typo.at("/spec/extProc/0");
    extProc.set("failopen", extProc.remove("failOpen"));
    assertThat(v.validate(typo)).anySatisfy(p -> assertThat(p).contains("failopen"));

    ObjectNode body = (ObjectNode) first("EnvoyExtensionPolicy").deepCopy();
    ((ObjectNode) body.at("/spec/extProc/0/processingMode/response")).put("body", "Stream");
    assertThat(v.validate(body)).anySatisfy(p -> assertThat(p).contains("Stream").contains("enum"));

    ObjectNode timeout = (ObjectNode) first("EnvoyExtensionPolicy").deepCopy();
    ((ObjectNode) timeout.at("/spec/extProc/0")).put("messageTimeout", "0.2s");
    assertThat(v.validate(timeout)).anySatisfy(p -> assertThat(p).contains("messageTimeout"));
  }
}
