package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/** One entry of an EnvoyFilter's {@code configPatches}, and where istiod puts its value. */
record IstioPatch(Manifests.Doc envoyFilter, int index, JsonNode patch) {

  /** Every patch of every EnvoyFilter shipped under istio/ and deploy/. */
  static List<IstioPatch> shipped() {
    List<IstioPatch> patches = new ArrayList<>();
    for (Manifests.Doc filter : Manifests.objectsOfKind("EnvoyFilter")) {
      JsonNode entries = filter.node().path("spec").path("configPatches");
      for (int i = 0; i < entries.size(); i++) {
        patches.add(new IstioPatch(filter, i, entries.get(i)));
      }
    }
    return patches;
  }

  String applyTo() {
    return patch.path("applyTo").asText();
  }

  String operation() {
    return patch.path("patch").path("operation").asText();
  }

  /**
   * A bootstrap holding the patch value where istiod would put it: an HTTP_FILTER into the HTTP
   * connection manager of a listener, relative to the {@code subFilter} its match names; a CLUSTER
   * ADD into the clusters; a NETWORK_FILTER MERGE into that connection manager. Anything else fails, so a new kind of patch is never validated by accident
   * in the wrong place.
   */
  JsonNode bootstrap() {
    JsonNode value = patch.path("patch").path("value");
    BootstrapAssembly assembly = new BootstrapAssembly();
    switch (applyTo()) {
      case "HTTP_FILTER" -> assembly.httpFilter(
          value, operation(), patch.at("/match/listener/filterChain/filter/subFilter/name").asText());
      case "CLUSTER" -> {
        if (!operation().equals("ADD")) {
          throw new AssertionError(this + ": only CLUSTER ADD is assembled, not " + operation());
        }
        assembly.cluster(value);
      }
      case "NETWORK_FILTER" -> {
        if (!operation().equals("MERGE") || !patch.at("/match/listener/filterChain/filter/name").asText()
            .equals(IstioEnvoyFilterTest.HCM)) {
          throw new AssertionError(this + ": only a NETWORK_FILTER MERGE into the HTTP connection manager is assembled");
        }
        assembly.mergeIntoConnectionManager(value);
      }
      default -> throw new AssertionError(this + ": no assembly for applyTo " + applyTo() + " yet");
    }
    return assembly.build();
  }

  @Override
  public String toString() {
    return envoyFilter + " patch #" + index + " " + applyTo() + " " + operation();
  }
}
