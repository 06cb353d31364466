package io.disaggusage.deploy;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Strict YAML reading: duplicate keys are errors; multi-document files yield every document. */
final class YamlDocuments {
  static final ObjectMapper YAML =
      new ObjectMapper(YAMLFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build());
  static final ObjectMapper JSON = JsonMapper.builder().build();

  private YamlDocuments() {}

  /** Every non-empty document of a file. */
  static List<JsonNode> read(Path file) {
    try (YAMLParser parser = (YAMLParser) YAML.getFactory().createParser(file.toFile())) {
      List<JsonNode> docs = new ArrayList<>();
      var it = YAML.readValues(parser, JsonNode.class);
      while (it.hasNext()) {
        JsonNode doc = it.next();
        if (doc != null && !doc.isNull() && !doc.isMissingNode() && !(doc.isObject() && doc.isEmpty())) {
          docs.add(doc);
        }
      }
      return docs;
    } catch (IOException e) {
      throw new UncheckedIOException(ProjectFiles.relative(file) + ": " + e.getMessage(), e);
    }
  }

  /** The one document of a single-document file. */
  static JsonNode single(Path file) {
    List<JsonNode> docs = read(file);
    if (docs.size() != 1) {
      throw new IllegalStateException(ProjectFiles.relative(file) + ": expected one document, found " + docs.size());
    }
    return docs.get(0);
  }
}
