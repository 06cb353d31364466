package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * The shipped Envoy Gateway manifests (deploy/envoy-gateway/) and the cluster around them
 * (deploy-validation's fixture: GatewayClass, Gateway llm-gateway, HTTPRoute disagg-workers, the worker
 * Services) as a standalone Envoy Gateway reads them, changed only where standalone mode forces it:
 * <ul>
 *   <li>{@link #servicesBecomeBackends}: the File provider stores no Services (a Service backendRef is
 *       rejected as not found), so each Service becomes a {@code Backend} of the same name at the
 *       address where the test's process listens, and every backendRef to it names kind Backend;</li>
 *   <li>{@link #socketMovedTo}: the sidecar's socket lives in an {@code emptyDir} of the proxy pod;
 *       on a host it is a file of the test's temporary folder;</li>
 * </ul>
 * The EnvoyProxy's Kubernetes provider patch (the sidecar container) has no meaning to the host
 * infrastructure, which starts Envoy as a local process: the test runs that container's program itself,
 * with the container's environment. Which EnvoyProxy the GatewayClass references is the operator's
 * choice that access-log.yaml describes, not a change ({@link #parametersRef}).
 */
final class StandaloneManifests {
  static final String DIR = "deploy/envoy-gateway";
  static final String CLUSTER_FIXTURE = "deploy-validation/src/test/resources/envoy-gateway/cluster.yaml";
  static final String BACKEND_GROUP = "gateway.envoyproxy.io";
  /** The namespace of the route, the policies and the Services (the README's and the fixture's). */
  static final String NAMESPACE = "llm";
  /** The central Service of deploy/kubernetes/ that extension-policy.yaml calls. */
  static final String CENTRAL_SERVICE = "disagg-usage-extproc";

  private StandaloneManifests() {}

  /** A shipped file as it is. */
  static String shipped(String file) {
    try {
      return Files.readString(Tools.root().resolve(DIR).resolve(file));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Every document of a YAML text. */
  static List<ObjectNode> documents(String yaml) {
    List<ObjectNode> docs = new ArrayList<>();
    try (var values = ShippedBootstrap.YAML.readerFor(JsonNode.class).<JsonNode>readValues(yaml)) {
      while (values.hasNext()) {
        JsonNode doc = values.next();
        if (doc != null && doc.isObject()) {
          docs.add((ObjectNode) doc);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return docs;
  }

  static String yaml(List<ObjectNode> docs) {
    StringBuilder out = new StringBuilder();
    for (ObjectNode doc : docs) {
      try {
        out.append(ShippedBootstrap.YAML.writeValueAsString(doc));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return out.toString();
  }

  static List<ObjectNode> clusterFixture() {
    try {
      return documents(Files.readString(Tools.root().resolve(CLUSTER_FIXTURE)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static Predicate<ObjectNode> kind(String kind) {
    return doc -> doc.path("kind").asText().equals(kind);
  }

  static String name(JsonNode doc) {
    return doc.path("metadata").path("name").asText();
  }

  /** The object of {@code kind} among {@code docs}; fails when there is not exactly one. */
  static ObjectNode only(List<ObjectNode> docs, String kind) {
    List<ObjectNode> found = docs.stream().filter(kind(kind)).toList();
    if (found.size() != 1) {
      throw new AssertionError("expected one " + kind + ", found " + found.size());
    }
    return found.get(0);
  }

  /**
   * Standalone change 1: each Service named in {@code ports} becomes a Backend of its name (in
   * {@link #NAMESPACE}) at {@code address} and the port given: its Service object among {@code docs}, if
   * there, is replaced (the central Service of deploy/kubernetes/ is not among them, so its Backend is
   * added), and every backendRef to it (routes, extension policies) names the Backend. A ref's port
   * stays: Envoy Gateway takes a Backend's port from its endpoint.
   */
  static List<ObjectNode> servicesBecomeBackends(List<ObjectNode> docs, String address, java.util.Map<String, Integer> ports) {
    List<ObjectNode> out = new ArrayList<>();
    for (ObjectNode doc : docs) {
      if (!(kind("Service").test(doc) && ports.containsKey(name(doc)))) {
        ObjectNode copy = doc.deepCopy();
        copy.findParents("backendRefs").forEach(parent -> retarget((ArrayNode) parent.get("backendRefs"), ports.keySet()));
        out.add(copy);
      }
    }
    ports.forEach((service, port) -> out.add(backend(service, NAMESPACE, address, port)));
    return out;
  }

  /** The Backend that stands for a Service in {@link #servicesBecomeBackends}. */
  static ObjectNode backend(String name, String namespace, String address, int port) {
    ObjectNode backend = ShippedBootstrap.YAML.createObjectNode();
    backend.put("apiVersion", BACKEND_GROUP + "/v1alpha1").put("kind", "Backend");
    backend.putObject("metadata").put("name", name).put("namespace", namespace);
    backend.putObject("spec").putArray("endpoints").addObject().putObject("ip").put("address", address).put("port", port);
    return backend;
  }

  private static void retarget(ArrayNode refs, java.util.Set<String> services) {
    for (JsonNode ref : refs) {
      boolean service = ref.path("kind").asText("Service").equals("Service") && ref.path("group").asText("").isEmpty();
      if (service && services.contains(ref.path("name").asText())) {
        ((ObjectNode) ref).put("group", BACKEND_GROUP).put("kind", "Backend");
      }
    }
  }

  /**
   * Standalone change 2: the sidecar's socket path, in the Backend and in the container's
   * {@code DISAGG_USAGE_GRPC_LISTEN}, becomes {@code socket}.
   */
  static List<ObjectNode> socketMovedTo(List<ObjectNode> docs, Path socket) {
    List<ObjectNode> out = new ArrayList<>();
    for (ObjectNode doc : docs) {
      ObjectNode copy = doc.deepCopy();
      for (JsonNode unix : copy.findValues("unix")) {
        ((ObjectNode) unix).put("path", socket.toString());
      }
      for (JsonNode env : copy.findValues("env")) {
        for (JsonNode variable : env) {
          if (variable.path("name").asText().equals("DISAGG_USAGE_GRPC_LISTEN")) {
            ((ObjectNode) variable).put("value", "unix://" + socket);
          }
        }
      }
      out.add(copy);
    }
    return out;
  }

  /** The GatewayClass of {@code docs} referencing {@code envoyProxy} (spec.parametersRef). */
  static List<ObjectNode> parametersRef(List<ObjectNode> docs, ObjectNode envoyProxy) {
    List<ObjectNode> out = new ArrayList<>();
    for (ObjectNode doc : docs) {
      ObjectNode copy = doc.deepCopy();
      if (kind("GatewayClass").test(copy)) {
        ((ObjectNode) copy.path("spec")).putObject("parametersRef").put("group", BACKEND_GROUP).put("kind", "EnvoyProxy")
            .put("name", name(envoyProxy)).put("namespace", envoyProxy.path("metadata").path("namespace").asText());
      }
      out.add(copy);
    }
    return out;
  }

  /** The sidecar container of the shipped EnvoyProxy patch: its environment, as name=value settings. */
  static List<String> sidecarEnvironment(ObjectNode envoyProxy, String container) {
    List<String> settings = new ArrayList<>();
    for (JsonNode c : envoyProxy.at("/spec/provider/kubernetes/envoyDeployment/patch/value/spec/template/spec/containers")) {
      if (c.path("name").asText().equals(container)) {
        c.path("env").forEach(e -> settings.add(e.path("name").asText() + "=" + e.path("value").asText()));
        return settings;
      }
    }
    throw new AssertionError("no container " + container + " in EnvoyProxy " + name(envoyProxy));
  }
}
