package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.IntOrString;
import io.fabric8.kubernetes.api.model.LabelSelector;
import io.fabric8.kubernetes.api.model.LabelSelectorRequirement;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * What the Kubernetes policy tests ({@link KubernetesPolicyTest}, {@link KubernetesOverlayPolicyTest})
 * and the pod-local ones read from the manifests: the service's configuration keys and default ports,
 * the files a container sees through its ConfigMap volumes, its ports, probes and label selectors.
 */
final class KubernetesPolicies {
  /**
   * The service's configuration keys, read from docs/configuration.md's key table (which the server
   * module's ConfigurationDocTest keeps equal to the loader's key list).
   */
  static final Set<String> CONFIG_KEYS = documentedConfigKeys();

  private static Set<String> documentedConfigKeys() {
    try {
      Set<String> keys = new java.util.TreeSet<>();
      java.util.regex.Matcher m =
          java.util.regex.Pattern.compile("(?m)^\\| `([a-z_]+(?:\\.[a-z_]+)+)` \\|")
              .matcher(java.nio.file.Files.readString(ProjectFiles.resolve("docs/configuration.md")));
      while (m.find()) {
        keys.add(m.group(1));
      }
      if (!keys.contains("grpc.port") || !keys.contains("store.type")) {
        throw new IllegalStateException("docs/configuration.md has no key table");
      }
      return Set.copyOf(keys);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Ports an Istio data plane adds to a pod that no manifest declares: 15008, ambient's HBONE tunnel,
   * and 15020, where an injected sidecar serves the merged metrics Prometheus scrapes.
   */
  static final Set<Integer> ISTIO_PORTS = Set.of(15008, 15020);
  static final int DEFAULT_GRPC_PORT = 9002;
  static final int DEFAULT_ADMIN_PORT = 9090;
  static final String EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor";
  /** The longest generation a pod must be able to finish when it is told to stop. */
  static final long LONGEST_GENERATION_SECONDS = 600;

  private KubernetesPolicies() {}

  static JsonNode parse(String yaml) {
    try {
      return YamlDocuments.YAML.readTree(yaml);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Dotted keys of the config that the service does not know. */
  static List<String> unknownConfigKeys(JsonNode config) {
    assertThat(config.isObject()).as("config.yaml is a mapping").isTrue();
    List<String> keys = new ArrayList<>();
    flatten(config, "", keys);
    return keys.stream().filter(k -> !CONFIG_KEYS.contains(k)).toList();
  }

  private static void flatten(JsonNode node, String prefix, List<String> out) {
    node.fields().forEachRemaining(e -> {
      String key = prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey();
      if (e.getValue().isObject()) {
        flatten(e.getValue(), key, out);
      } else {
        out.add(key);
      }
    });
  }

  /** The port the service binds: flag, then --set, then environment, then file, then default. */
  static int effectivePort(Container c, JsonNode config, String key, String flag, int dflt) {
    List<String> args = c.getArgs() == null ? List.of() : c.getArgs();
    Integer fromFlag = null;
    Integer fromSet = null;
    for (int i = 0; i < args.size(); i++) {
      String a = args.get(i);
      String next = i + 1 < args.size() ? args.get(i + 1) : null;
      if (a.equals(flag) && next != null) {
        fromFlag = Integer.valueOf(next);
      } else if (a.startsWith(flag + "=")) {
        fromFlag = Integer.valueOf(a.substring(flag.length() + 1));
      } else if ((a.equals("--set") || a.equals("-s")) && next != null && next.startsWith(key + "=")) {
        fromSet = Integer.valueOf(next.substring(key.length() + 1));
      } else if (a.startsWith("--set=" + key + "=")) {
        fromSet = Integer.valueOf(a.substring(("--set=" + key + "=").length()));
      }
    }
    if (fromFlag != null) {
      return fromFlag;
    }
    if (fromSet != null) {
      return fromSet;
    }
    String fromEnv = env(c, "DISAGG_USAGE_" + key.toUpperCase().replace('.', '_'));
    if (fromEnv != null) {
      return Integer.parseInt(fromEnv);
    }
    String[] parts = key.split("\\.");
    JsonNode value = config.path(parts[0]).path(parts[1]);
    return value.isMissingNode() || value.isNull() ? dflt : value.asInt();
  }

  /** The service's config file, read from the ConfigMap mounted where {@code --config} points. */
  static JsonNode mountedConfig(Workload w, Container c, Map<String, ConfigMap> configMaps) {
    List<String> args = c.getArgs() == null ? List.of() : c.getArgs();
    int i = args.indexOf("--config");
    String path = i >= 0 && i + 1 < args.size() ? args.get(i + 1) : env(c, "DISAGG_USAGE_CONFIG");
    assertThat(path).as(w + " passes --config").isNotNull();
    return parse(mountedFile(w, c, path, configMaps));
  }

  /** The content of a file that a container sees at {@code path} through a ConfigMap volume. */
  static String mountedFile(Workload w, Container c, String path, Map<String, ConfigMap> configMaps) {
    Path file = Path.of(path);
    VolumeMount mount = c.getVolumeMounts().stream()
        .filter(m -> Path.of(m.getMountPath()).equals(file.getParent()) && m.getSubPath() == null)
        .findFirst().orElseThrow(() -> new AssertionError(w + " container " + c.getName() + ": nothing mounted at "
            + file.getParent()));
    Volume volume = volume(w, mount.getName());
    assertThat(volume.getConfigMap()).as(w + " volume " + volume.getName() + " is a ConfigMap").isNotNull();
    ConfigMap cm = configMaps.get(volume.getConfigMap().getName());
    assertThat(cm).as(w + " ConfigMap " + volume.getConfigMap().getName()).isNotNull();
    String key = file.getFileName().toString();
    assertThat(cm.getData()).as(w + " ConfigMap " + cm.getMetadata().getName()).containsKey(key);
    return cm.getData().get(key);
  }

  static Volume volume(Workload w, String name) {
    return w.pod().getVolumes().stream().filter(v -> v.getName().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError(w + ": no volume " + name));
  }

  static Map<String, String> templateAnnotations(Workload w) {
    return KubernetesManifests.podTemplate(w.object()).orElseThrow().getMetadata().getAnnotations();
  }

  static String env(Container c, String name) {
    if (c.getEnv() == null) {
      return null;
    }
    return c.getEnv().stream().filter(e -> e.getName().equals(name)).map(EnvVar::getValue).filter(Objects::nonNull)
        .findFirst().orElse(null);
  }

  static int namedPort(Container c, String name) {
    return c.getPorts().stream().filter(p -> name.equals(p.getName())).map(ContainerPort::getContainerPort)
        .findFirst().orElseThrow(() -> new AssertionError("container " + c.getName() + " has no port named " + name));
  }

  static List<Probe> probes(Container c) {
    return Stream.of(c.getStartupProbe(), c.getReadinessProbe(), c.getLivenessProbe()).filter(Objects::nonNull).toList();
  }

  static Optional<Integer> probePort(Probe p, Map<String, Integer> ports) {
    if (p.getGrpc() != null) {
      return resolve(new IntOrString(p.getGrpc().getPort()), ports);
    }
    if (p.getHttpGet() != null) {
      return resolve(p.getHttpGet().getPort(), ports);
    }
    if (p.getTcpSocket() != null) {
      return resolve(p.getTcpSocket().getPort(), ports);
    }
    return Optional.empty();
  }

  /** A port given by number or name, if it is one of {@code ports}. */
  static Optional<Integer> resolve(IntOrString port, Map<String, Integer> ports) {
    if (port == null) {
      return Optional.empty();
    }
    String key = port.getIntVal() != null ? String.valueOf(port.getIntVal()) : port.getStrVal();
    return Optional.ofNullable(ports.get(key));
  }

  static boolean matches(LabelSelector selector, Map<String, String> labels) {
    if (selector == null) {
      return false;
    }
    if (!matches(selector.getMatchLabels(), labels)) {
      return false;
    }
    for (LabelSelectorRequirement r : selector.getMatchExpressions()) {
      String value = labels.get(r.getKey());
      boolean ok = switch (r.getOperator()) {
        case "In" -> value != null && r.getValues().contains(value);
        case "NotIn" -> value == null || !r.getValues().contains(value);
        case "Exists" -> value != null;
        case "DoesNotExist" -> value == null;
        default -> throw new AssertionError("unknown selector operator " + r.getOperator());
      };
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  static boolean matches(Map<String, String> matchLabels, Map<String, String> labels) {
    return matchLabels == null || labels.entrySet().containsAll(matchLabels.entrySet());
  }
}
