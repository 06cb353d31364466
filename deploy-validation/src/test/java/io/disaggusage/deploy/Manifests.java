package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * The shipped Kubernetes-style objects (every document with a {@code kind}) and the few facts the
 * mesh and gateway manifests must agree on: the worker Services' port and the central Service's gRPC
 * port. Those facts are read from the Service objects under {@code deploy/} when the tree has them;
 * otherwise the documented values are used.
 */
final class Manifests {
  /** Namespace placeholder every shipped object uses. */
  static final String NAMESPACE = "llm";
  /** The central Service (deploy/kubernetes/). */
  static final String CENTRAL_SERVICE = "disagg-usage-extproc";
  /** The edge guard's Service (deploy/kubernetes/components/edge-guard), for the client-facing route. */
  static final String EDGE_GUARD_SERVICE = "disagg-usage-edge-guard";
  /** The client-facing HTTPRoute / route to the orchestrator, where the edge guard goes (never the workers'). */
  static final String CLIENT_ROUTE = "llm-api";
  /** The orchestrator's Service that the client-facing route sends to. */
  static final String ORCHESTRATOR_SERVICE = "orchestrator";
  /** The worker Services the orchestrator calls. */
  static final List<String> WORKER_SERVICES = List.of("context-workers", "generation-workers");
  /**
   * The worker Services' port when no worker Service is shipped under deploy/: the worker pools are
   * usually the user's own objects, and 8000 is the port the manifests and docs assume for them.
   */
  static final int DEFAULT_WORKER_PORT = 8000;
  /** The service's gRPC port (ext_proc + grpc.health.v1) when no central Service is shipped. */
  static final int DEFAULT_GRPC_PORT = 9002;

  private Manifests() {}

  /** One object of a multi-document file. */
  record Doc(Path file, int index, JsonNode node) {
    String kind() {
      return node.path("kind").asText();
    }

    String name() {
      return node.path("metadata").path("name").asText();
    }

    String namespace() {
      return node.path("metadata").path("namespace").asText();
    }

    @Override
    public String toString() {
      return ProjectFiles.relative(file) + "#" + index + " " + kind() + "/" + name();
    }
  }

  /** Every document with a {@code kind} under {@code dir} (relative to the repository root). */
  static List<Doc> objects(String dir) {
    List<Doc> docs = new ArrayList<>();
    for (Path file : ProjectFiles.yamlFiles(dir)) {
      List<JsonNode> nodes = YamlDocuments.read(file);
      for (int i = 0; i < nodes.size(); i++) {
        if (nodes.get(i).hasNonNull("kind")) {
          docs.add(new Doc(file, i, nodes.get(i)));
        }
      }
    }
    return docs;
  }

  /** Every object of {@code kind} under {@code istio/} and {@code deploy/}. */
  static List<Doc> objectsOfKind(String kind) {
    List<Doc> docs = new ArrayList<>();
    for (String dir : List.of("istio", "deploy")) {
      objects(dir).stream().filter(d -> d.kind().equals(kind)).forEach(docs::add);
    }
    return docs;
  }

  /** A core Service of that name shipped under deploy/, if any. */
  static Optional<JsonNode> service(String name) {
    return objects("deploy").stream()
        .filter(d -> d.kind().equals("Service") && d.node.path("apiVersion").asText().equals("v1"))
        .filter(d -> d.name().equals(name))
        .map(Doc::node)
        .findFirst();
  }

  private static OptionalInt port(JsonNode service, String portName) {
    for (JsonNode p : service.path("spec").path("ports")) {
      if (portName == null || portName.equals(p.path("name").asText())) {
        return OptionalInt.of(p.path("port").asInt());
      }
    }
    return OptionalInt.empty();
  }

  /** The worker Services' port: from the shipped worker Services, else {@link #DEFAULT_WORKER_PORT}. */
  static int workerPort() {
    for (String name : WORKER_SERVICES) {
      Optional<JsonNode> svc = service(name);
      if (svc.isPresent()) {
        OptionalInt p = port(svc.get(), null);
        if (p.isPresent()) {
          return p.getAsInt();
        }
      }
    }
    return DEFAULT_WORKER_PORT;
  }

  /** The central Service's port named {@code grpc}: from deploy/, else {@link #DEFAULT_GRPC_PORT}. */
  static int centralGrpcPort() {
    return service(CENTRAL_SERVICE).map(s -> port(s, "grpc")).filter(OptionalInt::isPresent)
        .map(OptionalInt::getAsInt).orElse(DEFAULT_GRPC_PORT);
  }

  /** The edge guard's Service port named {@code grpc}: from deploy/, else {@link #DEFAULT_GRPC_PORT}. */
  static int edgeGuardGrpcPort() {
    return service(EDGE_GUARD_SERVICE).map(s -> port(s, "grpc")).filter(OptionalInt::isPresent)
        .map(OptionalInt::getAsInt).orElse(DEFAULT_GRPC_PORT);
  }

  /** Istio's name for the outbound cluster of a Service port (no subset). */
  static String istioOutboundCluster(String service, int port) {
    return "outbound|" + port + "||" + serviceHost(service);
  }

  static String serviceHost(String service) {
    return service + "." + NAMESPACE + ".svc.cluster.local";
  }
}
