package io.disaggusage.deploy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The fenced {@code yaml} blocks of the documentation (README.md first, then every other Markdown file
 * of the repository) and which of them are Envoy configuration, of which {@link EnvoySnippetKind}.
 *
 * <p>A block is Envoy configuration when its first line says so ({@code # envoy: <proto type>}) or
 * its shape is one of Envoy's (a list is judged item by item). Kubernetes objects (a block with
 * {@code apiVersion} and {@code kind}: Istio and Envoy Gateway resources among them) are not Envoy
 * configuration; neither is the service's own configuration. A block that is neither recognised nor
 * a Kubernetes object but names Envoy types is an error, so an Envoy snippet is never left unchecked
 * because its shape was not foreseen.
 */
final class DocSnippets {
  /** A fenced yaml block, possibly indented (inside a list item); group 1 = indent, 2 = body. */
  private static final Pattern BLOCK = Pattern.compile("(?m)^( *)```yaml\\n(.*?)^\\1```", Pattern.DOTALL);
  private static final Pattern MARKER = Pattern.compile("\\A# envoy: ([\\w.]+)\\n");
  private static final Pattern ENVOY_WORDING = Pattern.compile("type\\.googleapis\\.com/envoy\\.|envoy\\.filters\\.|static_resources");

  /** One block recognised as Envoy configuration. */
  record EnvoySnippet(String where, EnvoySnippetKind kind, List<JsonNode> items) {
    JsonNode bootstrap() {
      return kind.bootstrap(items);
    }

    @Override
    public String toString() {
      return where + " " + kind;
    }
  }

  private DocSnippets() {}

  /** Every Envoy snippet of the documentation. */
  static List<EnvoySnippet> envoySnippets() {
    List<EnvoySnippet> snippets = new ArrayList<>();
    for (Path doc : docs()) {
      Matcher m = BLOCK.matcher(read(doc));
      int n = 0;
      while (m.find()) {
        String where = ProjectFiles.relative(doc) + " yaml block #" + ++n;
        String body = m.group(2).replaceAll("(?m)^" + m.group(1), "");
        recognise(where, body).ifPresent(snippets::add);
      }
    }
    return snippets;
  }

  static Optional<EnvoySnippet> recognise(String where, String body) {
    JsonNode node = parse(where, body);
    List<JsonNode> items = new ArrayList<>();
    if (node.isArray()) {
      node.forEach(items::add);
    } else {
      items.add(node);
    }
    Matcher marker = MARKER.matcher(body);
    if (marker.find()) {
      EnvoySnippetKind kind = EnvoySnippetKind.named(marker.group(1))
          .orElseThrow(() -> new AssertionError(where + ": no snippet kind for # envoy: " + marker.group(1)));
      return Optional.of(new EnvoySnippet(where, kind, items));
    }
    if (node.has("apiVersion") && node.has("kind")) {
      return Optional.empty();
    }
    List<EnvoySnippetKind> kinds = items.stream().map(i -> EnvoySnippetKind.ofShape(i).orElse(null)).distinct().toList();
    if (kinds.size() == 1 && kinds.get(0) != null) {
      return Optional.of(new EnvoySnippet(where, kinds.get(0), items));
    }
    if (ENVOY_WORDING.matcher(body).find()) {
      throw new AssertionError(where + ": looks like Envoy configuration of no recognised kind " + kinds
          + "; start it with # envoy: <proto type> or make it whole");
    }
    return Optional.empty();
  }

  private static JsonNode parse(String where, String body) {
    try {
      return YamlDocuments.YAML.readTree(body);
    } catch (JsonProcessingException e) {
      throw new AssertionError(where + ": not YAML: " + e.getOriginalMessage(), e);
    }
  }

  /** README.md, then every other Markdown file outside build output and hidden folders. */
  static List<Path> docs() {
    Path readme = ProjectFiles.resolve("README.md");
    List<Path> docs = new ArrayList<>(List.of(readme));
    try (Stream<Path> files = Files.walk(ProjectFiles.root())) {
      files
          .filter(p -> p.toString().endsWith(".md") && !p.equals(readme))
          .filter(p -> !("/" + ProjectFiles.relative(p)).matches(".*/(target|\\.[^/]*)/.*"))
          .sorted()
          .forEach(docs::add);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return docs;
  }

  private static String read(Path doc) {
    try {
      return Files.readString(doc);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
