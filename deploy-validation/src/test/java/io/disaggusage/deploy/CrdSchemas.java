package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.dialect.Dialects;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The CRD schemas kept in {@code ../shared/schemas} as JSON-schema validators: the served version's
 * {@code openAPIV3Schema}, strictified (unknown fields are errors, as with the API server's strict
 * field validation), validated with the OpenAPI 3.0 dialect. CEL rules are not evaluated here.
 */
final class CrdSchemas {
  /** CRD file in the shared folder, by kind. */
  static final Map<String, String> FILES = Map.of(
      "EnvoyFilter", "istio-envoyfilter-crd.yaml",
      "EnvoyExtensionPolicy", "envoy-gateway-envoyextensionpolicy-crd.yaml");

  private static final SchemaRegistry REGISTRY = SchemaRegistry.withDefaultDialect(Dialects.getOpenApi30());
  private static final Map<String, Validator> CACHE = new ConcurrentHashMap<>();

  private CrdSchemas() {}

  /** A CRD's group, served versions and strictified schema of its (single) served version. */
  record Validator(String group, List<String> servedVersions, JsonNode openApiSchema, Schema schema) {
    List<String> validate(JsonNode object) {
      List<String> problems = new ArrayList<>();
      String apiVersion = object.path("apiVersion").asText();
      if (servedVersions.stream().noneMatch(v -> apiVersion.equals(group + "/" + v))) {
        problems.add("apiVersion " + apiVersion + " is not served by the CRD (" + group + " " + servedVersions + ")");
      }
      for (Error e : schema.validate(object)) {
        problems.add(e.getInstanceLocation() + ": " + e.getMessage());
      }
      return problems;
    }
  }

  /**
   * Envoy Gateway's own CRDs, by kind, as its module release ships them (the files of its Helm chart's
   * {@code crds/generated}): the Go module egctl is built from, which scripts/install-test-tools
   * downloads into {@code .tools/go/pkg/mod}, so they match egctl's version.
   */
  static final Map<String, String> ENVOY_GATEWAY_FILES = Map.of(
      "ClientTrafficPolicy", "gateway.envoyproxy.io_clienttrafficpolicies.yaml",
      "EnvoyPatchPolicy", "gateway.envoyproxy.io_envoypatchpolicies.yaml",
      "EnvoyProxy", "gateway.envoyproxy.io_envoyproxies.yaml",
      "Backend", "gateway.envoyproxy.io_backends.yaml");

  /**
   * The validator for an Envoy Gateway kind from the installed module's CRDs; a missing module fails with
   * the installer's name (it is installed with egctl, never optional).
   */
  static Validator envoyGatewayKind(String kind) {
    String file = ENVOY_GATEWAY_FILES.get(kind);
    if (file == null) {
      throw new IllegalArgumentException("no Envoy Gateway CRD for kind " + kind);
    }
    Path crd = ProjectFiles.resolve(".tools/go/pkg/mod/github.com/envoyproxy/gateway@" + GoTools.version(GoTools.EGCTL)
        + "/charts/gateway-helm/charts/crds/crds/generated/" + file);
    if (!java.nio.file.Files.isRegularFile(crd)) {
      throw new AssertionError(ProjectFiles.relative(crd) + " is missing: run " + EnvoyBinaries.INSTALLER
          + " (it downloads Envoy Gateway's module to build egctl)");
    }
    return CACHE.computeIfAbsent("envoy-gateway/" + kind, k -> load(crd));
  }

  /** The validator for {@code kind}, or empty when the shared schemas are absent. */
  static Optional<Validator> forKind(String kind) {
    Optional<Path> dir = ProjectFiles.sharedSchemas();
    if (dir.isEmpty()) {
      return Optional.empty();
    }
    String file = FILES.get(kind);
    if (file == null) {
      throw new IllegalArgumentException("no CRD schema for kind " + kind);
    }
    return Optional.of(CACHE.computeIfAbsent(kind, k -> load(dir.get().resolve(file))));
  }

  private static Validator load(Path crdFile) {
    JsonNode crd = YamlDocuments.single(crdFile);
    if (!"CustomResourceDefinition".equals(crd.path("kind").asText())) {
      throw new IllegalStateException(crdFile + " is not a CustomResourceDefinition");
    }
    String group = crd.path("spec").path("group").asText();
    List<String> served = new ArrayList<>();
    JsonNode schema = null;
    for (JsonNode version : crd.path("spec").path("versions")) {
      if (version.path("served").asBoolean()) {
        served.add(version.path("name").asText());
        if (schema == null || version.path("storage").asBoolean()) {
          schema = version.path("schema").path("openAPIV3Schema");
        }
      }
    }
    if (schema == null || schema.isMissingNode()) {
      throw new IllegalStateException(crdFile + " has no served version with a schema");
    }
    ObjectNode root = (ObjectNode) schema.deepCopy();
    ObjectNode properties = root.has("properties") ? (ObjectNode) root.get("properties") : root.putObject("properties");
    // Some CRDs leave the envelope out of their schema; the API server always knows it.
    if (!properties.has("apiVersion")) {
      properties.putObject("apiVersion").put("type", "string");
    }
    if (!properties.has("kind")) {
      properties.putObject("kind").put("type", "string");
    }
    if (!properties.has("metadata")) {
      properties.putObject("metadata").put("type", "object");
    }
    int changed = strictify(root);
    if (changed == 0) {
      throw new IllegalStateException(crdFile + ": strictify changed nothing");
    }
    return new Validator(group, List.copyOf(served), root, REGISTRY.getSchema(root));
  }

  /**
   * Adds {@code additionalProperties: false} to every object schema with {@code properties} that has
   * neither {@code additionalProperties} nor {@code x-kubernetes-preserve-unknown-fields: true}, walking
   * {@code properties}, {@code items} and schema-valued {@code additionalProperties} (not into
   * {@code allOf}/{@code anyOf}/{@code oneOf} branches, where it would reject the siblings' fields).
   * Returns how many schemas it changed.
   */
  static int strictify(JsonNode schema) {
    if (!(schema instanceof ObjectNode node)) {
      return 0;
    }
    int changed = 0;
    boolean preserve = node.path("x-kubernetes-preserve-unknown-fields").asBoolean(false);
    if (node.has("properties") && !node.has("additionalProperties") && !preserve) {
      node.put("additionalProperties", false);
      changed++;
    }
    for (JsonNode child : node.path("properties")) {
      changed += strictify(child);
    }
    changed += strictify(node.path("items"));
    if (node.path("additionalProperties").isObject()) {
      changed += strictify(node.get("additionalProperties"));
    }
    return changed;
  }
}
