package io.disaggusage.extproc.store;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.usage.ContextUsage;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Redis store's wire format, version 2 (docs/redis.md, "Key and value format"). Every name the
 * store writes is derived here from {@code store.key_prefix}:
 *
 * <pre>
 *   entry key   {&lt;prefix&gt;v2}:ctx:&lt;fingerprint&gt;:&lt;store key&gt;
 *               e.g. {disagg_usage:v2}:ctx:0123…cdef:trt:2748779069441234567
 *   fingerprints {&lt;prefix&gt;v2}:fps:&lt;store key&gt;  sorted set: fingerprint → expiry (ms), oldest first
 *   index key   {&lt;prefix&gt;v2}:entries             sorted set: entry id → expiry (ms), for the entry count
 *   channel     &lt;prefix&gt;v2:ready                 wake-ups: {"fp":"&lt;fingerprint&gt;","keys":[store keys]}
 * </pre>
 *
 * The fingerprint is 32 hex digits, or {@code -} for an unbound leg (its body was not read). It comes
 * before the store key so that (fingerprint, store key) → entry key is one-to-one whatever a store key
 * holds. One entry key per (fingerprint, store key) rather than a hash per store key: a plain key
 * carries its own TTL on every Redis version (hash fields do only from 7.4), and every name still
 * shares the one hash tag, so a Cluster's scripts touch one slot.
 *
 * <p>The value, identical under every alias key of one entry:
 *
 * <pre>
 * {"v":2,"id":"&lt;entry id&gt;","fp":"&lt;fingerprint&gt;","keys":["trt:1","trt:2"],"prompt_tokens":"101",
 *  "cached_tokens":"7","details":{"cached_tokens":"7"}}
 * </pre>
 *
 * An Anthropic context usage that states a cache creation count adds
 * {@code "cache_creation_tokens":"<n>"}; readers that predate it ignore it (its prompt is already in
 * {@code prompt_tokens}).
 *
 * <p>Counts are decimal strings (exact beyond 2^53); each {@code details} member is the context worker's
 * raw JSON value as a string, so it round-trips byte for byte and the store's Lua scripts (which decode
 * the value to find the aliases) never meet a number or nesting depth they cannot represent.
 *
 * <p>Version 1 (no fingerprint) lives under {@code {<prefix>v1}} names this version never reads: an
 * unbound v1 entry is exactly what a colliding or forged key could take, so during a rolling upgrade a
 * flow whose two legs meet replicas of different versions passes through uncorrected.
 */
public final class RedisEntryFormat {
  /** The format version, in every key and every value. */
  public static final int VERSION = 2;

  private static final JsonFactory JSON = new JsonFactory();
  private static final ObjectMapper MAPPER = new ObjectMapper(JSON);

  private final String keyPrefix;
  private final String fingerprintsPrefix;
  private final String indexKey;
  private final String channel;

  /** @param prefix {@code store.key_prefix}, e.g. {@code disagg_usage:} */
  public RedisEntryFormat(String prefix) {
    // One hash tag for every key: an entry's aliases must sit in one Cluster slot for the Lua scripts.
    String tag = "{" + prefix + "v" + VERSION + "}";
    this.keyPrefix = tag + ":ctx:";
    this.fingerprintsPrefix = tag + ":fps:";
    this.indexKey = tag + ":entries";
    this.channel = prefix + "v" + VERSION + ":ready";
  }

  /**
   * An entry as read back: the fingerprint it is bound to ({@code -}: unbound), the alias store keys it
   * was written under, and its usage.
   */
  public record Entry(String id, String fingerprint, List<String> keys, ContextUsage usage) {}

  /** A wake-up as read back: the fingerprint of the entry just written and its store keys. */
  public record WakeUp(String fingerprint, List<String> keys) {
    static final WakeUp NONE = new WakeUp("", List.of());
  }

  /** The Redis key of the entry bound to {@code fingerprint} under a store key such as {@code trt:123}. */
  public String key(String fingerprint, String storeKey) {
    return keyPrefix + fingerprint + ":" + storeKey;
  }

  /** What precedes the fingerprint in every entry key. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /** The sorted set of the fingerprints held under a store key. */
  public String fingerprintsKey(String storeKey) {
    return fingerprintsPrefix + storeKey;
  }

  /** What precedes the store key in every fingerprints key. */
  public String fingerprintsPrefix() {
    return fingerprintsPrefix;
  }

  public String indexKey() {
    return indexKey;
  }

  public String channel() {
    return channel;
  }

  /** The v2 value of an entry bound to {@code fingerprint}. */
  public static String encode(String id, String fingerprint, List<String> storeKeys, ContextUsage usage) {
    StringWriter out = new StringWriter(160);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeNumberField("v", VERSION);
      g.writeStringField("id", id);
      g.writeStringField("fp", fingerprint);
      g.writeArrayFieldStart("keys");
      for (String key : storeKeys) {
        g.writeString(key);
      }
      g.writeEndArray();
      g.writeStringField("prompt_tokens", usage.promptTokens().toString());
      g.writeStringField("cached_tokens", usage.cachedTokens().toString());
      if (usage.cacheCreationTokens() != null) {
        g.writeStringField("cache_creation_tokens", usage.cacheCreationTokens().toString());
      }
      g.writeObjectFieldStart("details");
      for (Map.Entry<String, String> detail : usage.details().entrySet()) {
        g.writeStringField(detail.getKey(), detail.getValue());
      }
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * Reads a value written by {@link #encode}.
   *
   * @throws IllegalArgumentException when it is not a v2 value (the message never quotes the value)
   */
  public static Entry decode(String value) {
    JsonNode root;
    try {
      root = MAPPER.readTree(value);
    } catch (IOException e) {
      throw new IllegalArgumentException("stored value is not JSON");
    }
    if (root == null || !root.isObject() || root.path("v").asInt(-1) != VERSION) {
      throw new IllegalArgumentException("stored value is not a v" + VERSION + " entry");
    }
    try {
      List<String> keys = new ArrayList<>();
      root.path("keys").forEach(k -> keys.add(k.textValue()));
      Map<String, String> details = new LinkedHashMap<>();
      Iterator<Map.Entry<String, JsonNode>> fields = root.path("details").fields();
      while (fields.hasNext()) {
        Map.Entry<String, JsonNode> field = fields.next();
        details.put(field.getKey(), requireText(field.getValue()));
      }
      JsonNode creation = root.get("cache_creation_tokens"); // optional: only Anthropic usage has it
      ContextUsage usage =
          new ContextUsage(
              new BigInteger(requireText(root.get("prompt_tokens"))),
              details,
              new BigInteger(requireText(root.get("cached_tokens"))),
              creation == null ? null : new BigInteger(requireText(creation)));
      return new Entry(
          requireText(root.get("id")), requireText(root.get("fp")), List.copyOf(keys), usage);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("stored value is not a valid v" + VERSION + " entry");
    }
  }

  /** A wake-up message: the fingerprint of the entry just written and the store keys it was written under. */
  public static String wakeUp(String fingerprint, List<String> storeKeys) {
    StringWriter out = new StringWriter(64);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("fp", fingerprint);
      g.writeArrayFieldStart("keys");
      for (String key : storeKeys) {
        g.writeString(key);
      }
      g.writeEndArray();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /** A wake-up message read back; {@link WakeUp#NONE} (no keys) for anything else. */
  public static WakeUp readWakeUp(String message) {
    try {
      JsonNode root = MAPPER.readTree(message);
      if (root == null || !root.isObject() || !root.path("fp").isTextual()) {
        return WakeUp.NONE;
      }
      List<String> keys = new ArrayList<>();
      root.path("keys").forEach(k -> {
        if (k.isTextual()) {
          keys.add(k.textValue());
        }
      });
      return new WakeUp(root.path("fp").textValue(), List.copyOf(keys));
    } catch (IOException e) {
      return WakeUp.NONE;
    }
  }

  private static String requireText(JsonNode node) {
    if (node == null || !node.isTextual()) {
      throw new IllegalArgumentException("expected a string");
    }
    return node.textValue();
  }
}
