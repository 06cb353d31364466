package io.disaggusage.extproc.config;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.deser.std.StdScalarDeserializer;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.ser.std.StdScalarSerializer;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.IOException;
import java.time.Duration;

/**
 * The configuration as a tree (sections, subsections, keys holding {@link ConfigKey}'s canonical
 * values) and Jackson's binding of such a tree to {@link Config} and back.
 */
final class ConfigTree {

  /**
   * Reads YAML, and binds trees to the records and back: snake_case keys, durations as {@link
   * ConfigLoader#formatDuration} writes them.
   */
  static final ObjectMapper MAPPER =
      YAMLMapper.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .addModule(
              new SimpleModule()
                  .addSerializer(
                      Duration.class,
                      new StdScalarSerializer<>(Duration.class) {
                        @Override
                        public void serialize(Duration value, JsonGenerator out, SerializerProvider p)
                            throws IOException {
                          out.writeString(ConfigLoader.formatDuration(value));
                        }
                      })
                  .addDeserializer(
                      Duration.class,
                      new StdScalarDeserializer<>(Duration.class) {
                        @Override
                        public Duration deserialize(JsonParser in, DeserializationContext c) throws IOException {
                          return ConfigLoader.parseDuration(in.getText());
                        }
                      }))
          .build();

  /** Every key's {@link Config.Default}: the bottom layer of every load. Never modified. */
  static final ObjectNode DEFAULT = defaultTree();

  /** {@link #DEFAULT} bound. */
  static final Config DEFAULTS = bind(DEFAULT);

  private ConfigTree() {}

  private static ObjectNode defaultTree() {
    ObjectNode tree = MAPPER.createObjectNode();
    for (ConfigKey key : ConfigKey.ALL) {
      put(tree, key, key.read(key.defaultText()));
    }
    return tree;
  }

  /** Sets {@code key} in {@code tree} to the canonical {@code value}, creating its section. */
  static void put(ObjectNode tree, ConfigKey key, JsonNode value) {
    tree.withObject(key.pointer().head()).set(key.pointer().last().getMatchingProperty(), value);
  }

  /** The records of a tree whose every key holds a canonical value. */
  static Config bind(JsonNode tree) {
    try {
      return MAPPER.treeToValue(tree, Config.class);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a configuration tree of canonical values did not bind", e);
    }
  }

  /** The tree of {@code config}. */
  static JsonNode of(Config config) {
    return MAPPER.valueToTree(config);
  }
}
