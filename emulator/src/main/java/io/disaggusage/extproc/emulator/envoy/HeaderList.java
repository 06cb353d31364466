package io.disaggusage.extproc.emulator.envoy;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * An ordered HTTP header map like Envoy's: lower-case keys, repeated keys allowed, pseudo-headers
 * stored as ordinary entries. Not thread-safe; the harness copies it before publishing.
 */
public final class HeaderList {
  private final List<Map.Entry<String, String>> entries = new ArrayList<>();

  public HeaderList() {}

  /** Builds a list from alternating names and values. */
  public static HeaderList of(String... namesAndValues) {
    if (namesAndValues.length % 2 != 0) {
      throw new IllegalArgumentException("names and values must come in pairs");
    }
    HeaderList list = new HeaderList();
    for (int i = 0; i < namesAndValues.length; i += 2) {
      list.add(namesAndValues[i], namesAndValues[i + 1]);
    }
    return list;
  }

  /** Appends an entry (the key is lower-cased). */
  public HeaderList add(String name, String value) {
    entries.add(Map.entry(name.toLowerCase(Locale.ROOT), value));
    return this;
  }

  /**
   * Overwrites: the first entry with that key gets the value, later entries with the same key are
   * removed; appends when the key is absent (Envoy's {@code setCopy}).
   */
  public HeaderList set(String name, String value) {
    String key = name.toLowerCase(Locale.ROOT);
    boolean replaced = false;
    for (int i = 0; i < entries.size(); i++) {
      if (entries.get(i).getKey().equals(key)) {
        if (!replaced) {
          entries.set(i, Map.entry(key, value));
          replaced = true;
        } else {
          entries.remove(i--);
        }
      }
    }
    if (!replaced) {
      entries.add(Map.entry(key, value));
    }
    return this;
  }

  /** Removes every entry with that key; returns whether any was removed. */
  public boolean remove(String name) {
    String key = name.toLowerCase(Locale.ROOT);
    return entries.removeIf(e -> e.getKey().equals(key));
  }

  public Optional<String> get(String name) {
    String key = name.toLowerCase(Locale.ROOT);
    return entries.stream().filter(e -> e.getKey().equals(key)).map(Map.Entry::getValue).findFirst();
  }

  public List<String> getAll(String name) {
    String key = name.toLowerCase(Locale.ROOT);
    return entries.stream().filter(e -> e.getKey().equals(key)).map(Map.Entry::getValue).toList();
  }

  public boolean contains(String name) {
    return get(name).isPresent();
  }

  /** The entries in order (an unmodifiable snapshot). */
  public List<Map.Entry<String, String>> entries() {
    return List.copyOf(entries);
  }

  public int size() {
    return entries.size();
  }

  /** Approximate byte size as Envoy counts it (key and value bytes). */
  public int byteSize() {
    int n = 0;
    for (Map.Entry<String, String> e : entries) {
      n += e.getKey().getBytes(StandardCharsets.UTF_8).length;
      n += e.getValue().getBytes(StandardCharsets.UTF_8).length;
    }
    return n;
  }

  public HeaderList copy() {
    HeaderList c = new HeaderList();
    c.entries.addAll(entries);
    return c;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HeaderList other && other.entries.equals(entries);
  }

  @Override
  public int hashCode() {
    return entries.hashCode();
  }

  @Override
  public String toString() {
    return entries.toString();
  }
}
