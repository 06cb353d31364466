package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.RealEnvoy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Real Envoy judges every piece of Envoy configuration the project ships or shows: {@code envoy --mode
 * validate} of each release {@code scripts/install-test-tools} pins (1.40.0 and 1.36.2 today) accepts,
 * without a warning (a deprecated field is one; an alpha filter's work-in-progress notice is not) —
 * a bootstrap that says it needs a newer Envoy is judged by the releases it names and refused by the
 * older ones —
 *
 * <ul>
 *   <li>every Envoy bootstrap under {@code deploy/}, the file itself;
 *   <li>for each patch of each Istio EnvoyFilter under {@code istio/}, a minimal bootstrap holding the
 *       patch value where istiod would put it ({@link IstioPatch});
 *   <li>for each Envoy YAML block of the documentation, a minimal bootstrap holding it where it
 *       belongs ({@link DocSnippets}, {@link EnvoySnippetKind}).
 * </ul>
 *
 * <p>Assembled bootstraps get stand-in clusters for the clusters they name but do not define, and a
 * generated certificate for the TLS files they name ({@link BootstrapAssembly}, {@link
 * StandInCertificate}). Envoy Gateway's resources ({@code deploy/envoy-gateway/}) are not Envoy
 * configuration — Envoy Gateway translates them into it — so they are checked against their CRD schema
 * ({@link EnvoyGatewayPolicyTest}), not here; neither are Kubernetes objects in the docs. Validate mode
 * does not check that an {@code envoy_grpc} cluster exists, nor resolve DNS.
 *
 * <p>A missing Envoy binary fails these tests with the command that installs it; they never skip.
 */
class RealEnvoyValidateTest {

  /**
   * A shipped bootstrap that says in a comment line "Needs Envoy X.Y or later" is judged by the
   * releases from X.Y on, and the older pinned releases must refuse it (so the comment is true).
   */
  private static final Pattern NEEDS = Pattern.compile("(?m)^# .*Needs Envoy (\\d+\\.\\d+) or later");
  /**
   * The one warning a shipped file may draw: Envoy marks its alpha filters' protos work-in-progress and
   * says so for each use (ai_protocol_manager, Envoy 1.40). The file's header says it is alpha.
   */
  private static final Pattern WORK_IN_PROGRESS = Pattern.compile(
      "\\]\\[warning\\].* message 'envoy\\.extensions\\.filters\\.http\\.ai_protocol_manager\\.v3\\.\\w+' is contained in proto file .* marked as work-in-progress");

  /** One configuration for Envoy: a shipped file as it is, or a bootstrap assembled around a piece. */
  record Config(String name, Path shippedFile, JsonNode assembled) {
    /** The oldest release the file says it needs ("Needs Envoy 1.40 or later"): {1, 40}; {} for any. */
    int[] needs() {
      if (shippedFile == null) {
        return new int[0];
      }
      try {
        Matcher m = NEEDS.matcher(Files.readString(shippedFile));
        return m.find() ? numbers(m.group(1)) : new int[0];
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }

    /** Whether {@code release} (e.g. 1.36.2) is one this configuration is meant for. */
    boolean judgedBy(String release) {
      return java.util.Arrays.compare(numbers(release), needs()) >= 0;
    }

    private static int[] numbers(String version) {
      return java.util.Arrays.stream(version.split("\\.")).mapToInt(Integer::parseInt).toArray();
    }

    static Config shipped(Path file) {
      return new Config(ProjectFiles.relative(file), file, null);
    }

    static Config assembled(String name, JsonNode bootstrap) {
      return new Config(name, null, bootstrap);
    }

    Path file(Path workDir) throws Exception {
      if (shippedFile != null) {
        return shippedFile;
      }
      JsonNode bootstrap = StandInCertificate.substitute(assembled, workDir);
      return Files.writeString(workDir.resolve("bootstrap.json"), YamlDocuments.JSON.writeValueAsString(bootstrap));
    }

    @Override
    public String toString() {
      return name;
    }
  }

  /** Every document under deploy/ that is an Envoy bootstrap (has static_resources). */
  static List<Path> shippedBootstraps() {
    List<Path> files = ProjectFiles.yamlFiles("deploy").stream()
        .filter(f -> YamlDocuments.read(f).stream().anyMatch(d -> d.has("static_resources")))
        .toList();
    assertThat(files).as("Envoy bootstraps under deploy/").isNotEmpty();
    return files;
  }

  static List<Config> configs() {
    List<Config> configs = new ArrayList<>();
    shippedBootstraps().forEach(f -> configs.add(Config.shipped(f)));
    List<IstioPatch> patches = IstioPatch.shipped();
    assertThat(patches).as("EnvoyFilter patches under istio/").isNotEmpty();
    patches.forEach(p -> configs.add(Config.assembled(p.toString(), p.bootstrap())));
    List<DocSnippets.EnvoySnippet> snippets = DocSnippets.envoySnippets();
    assertThat(snippets).as("Envoy snippets in the docs").isNotEmpty();
    snippets.forEach(s -> configs.add(Config.assembled(s.toString(), s.bootstrap())));
    return configs;
  }

  static Stream<Arguments> releasesAndConfigs() {
    return releasesAndConfigs(true);
  }

  static Stream<Arguments> releasesAndConfigsTooNew() {
    return releasesAndConfigs(false);
  }

  private static Stream<Arguments> releasesAndConfigs(boolean judged) {
    List<Config> configs = configs();
    return EnvoyBinaries.releases().stream()
        .flatMap(r -> configs.stream().filter(c -> c.judgedBy(r) == judged).map(c -> Arguments.of(r, c)));
  }

  @ParameterizedTest(name = "Envoy {0} refuses {1}, which says it needs a newer Envoy")
  @MethodSource("releasesAndConfigsTooNew")
  void anOlderEnvoyRefusesWhatSaysItNeedsANewerOne(String release, Config config) throws Exception {
    RealEnvoy.Verdict verdict = RealEnvoy.validate(EnvoyBinaries.locate(release), config.file(null));
    assertThat(verdict.accepted()).as("Envoy %s on %s:%n%s", release, config, verdict.output()).isFalse();
  }

  @Test
  void theEnvoyMeterCompositionIsJudgedOnlyFromEnvoy140() throws Exception {
    Config composition = Config.shipped(ProjectFiles.resolve("deploy/envoy/ai-protocol-manager/envoy.yaml"));
    assertThat(composition.needs()).containsExactly(1, 40);
    assertThat(composition.judgedBy("1.40.0")).isTrue();
    assertThat(composition.judgedBy("1.36.2")).isFalse();
  }

  @ParameterizedTest(name = "Envoy {0} accepts {1}")
  @MethodSource("releasesAndConfigs")
  void envoyAcceptsTheConfiguration(String release, Config config, @TempDir Path workDir) throws Exception {
    Path envoy = EnvoyBinaries.locate(release);
    Path file = config.file(workDir);
    RealEnvoy.Verdict verdict = RealEnvoy.validate(envoy, file);
    String said = "Envoy " + release + " on " + config + ":\n" + verdict.output()
        + (config.assembled() != null ? "\nassembled bootstrap:\n" + Files.readString(file) : "");
    assertThat(verdict.accepted()).as(said).isTrue();
    assertThat(verdict.complaints()).as(said).filteredOn(l -> !WORK_IN_PROGRESS.matcher(l).find()).isEmpty();
  }

  // ---- the harness itself --------------------------------------------------------------------

  static List<String> releases() {
    return EnvoyBinaries.releases();
  }

  /** A pass above means something only if Envoy's refusals and warnings reach the assertions. */
  @ParameterizedTest(name = "Envoy {0} rejects a typo and warns about a deprecated field")
  @MethodSource("releases")
  void envoysRefusalsAndWarningsAreHeard(String release, @TempDir Path workDir) throws Exception {
    Path envoy = EnvoyBinaries.locate(release);
    ObjectNode typo = YamlDocuments.single(EnvoyBootstrapTest.FILE).deepCopy();
    ((ObjectNode) typo.at("/static_resources/clusters/0")).put("conect_timeout", "1s");
    RealEnvoy.Verdict rejected = RealEnvoy.validate(envoy, Config.assembled("typo", typo).file(workDir));
    assertThat(rejected.accepted()).as(rejected.output()).isFalse();
    assertThat(rejected.output()).contains("conect_timeout");

    ObjectNode deprecated = YamlDocuments.single(EnvoyBootstrapTest.FILE).deepCopy();
    ((ObjectNode) deprecated.at("/static_resources/clusters/0")).putObject("http2_protocol_options");
    RealEnvoy.Verdict warned = RealEnvoy.validate(envoy, Config.assembled("deprecated", deprecated).file(workDir));
    assertThat(warned.accepted()).as(warned.output()).isTrue();
    assertThat(warned.complaints()).anySatisfy(l -> assertThat(l).contains("http2_protocol_options"));
  }

  @Test
  void everyShippedBootstrapIsJudgedThePodLocalOnesIncluded() {
    assertThat(shippedBootstraps().stream().map(ProjectFiles::relative)).contains(
        "deploy/envoy/envoy.yaml", "deploy/envoy/pod-local/prefill.yaml", "deploy/envoy/pod-local/decode.yaml");
  }

  @Test
  void aMissingBinaryFailsAndSaysHowToInstallIt() {
    assertThatThrownBy(() -> EnvoyBinaries.locate("0.0.0-not-pinned"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining(EnvoyBinaries.INSTALLER);
  }

  @Test
  void assembliesPutPatchesWhereIstiodPutsThemAndStandInForMissingClusters() throws Exception {
    JsonNode filter = YamlDocuments.YAML.readTree(
        "name: f\ntyped_config: {envoy_grpc_holder: {grpc_service: {envoy_grpc: {cluster_name: 'outbound|9002||x'}}}}");
    JsonNode bootstrap = new BootstrapAssembly().httpFilterBeforeRouter(filter).build();
    assertThat(bootstrap.findValues("http_filters").get(0).findValuesAsText("name"))
        .startsWith("f").endsWith(BootstrapAssembly.ROUTER);
    assertThat(bootstrap.at("/static_resources/clusters").findValuesAsText("cluster_name"))
        .contains("outbound|9002||x", "workers");
    JsonNode merge = YamlDocuments.YAML.readTree("typed_config: {'@type': type.googleapis.com/envoy.extensions.filters"
        + ".network.http_connection_manager.v3.HttpConnectionManager, preserve_external_request_id: true}");
    JsonNode merged = new BootstrapAssembly().mergeIntoConnectionManager(merge).build()
        .at("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config");
    assertThat(merged.path("preserve_external_request_id").asBoolean()).isTrue();
    assertThat(merged.path("stat_prefix").asText()).as("the rest of the connection manager stays").isEqualTo("assembled");
  }
}
