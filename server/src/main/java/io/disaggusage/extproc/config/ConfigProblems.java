package io.disaggusage.extproc.config;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What one load found wrong, in the order found, and where each key's current value came from, so
 * that a problem names its origin. A key whose latest value could not be read is not validated: its
 * read error says enough.
 */
final class ConfigProblems {
  private final List<String> problems = new ArrayList<>();
  private final Map<String, String> origins = new HashMap<>();
  private final Set<String> unreadable = new HashSet<>();

  /** A problem that is not about one key's value (a file, an unknown key); {@code line} says where. */
  void add(String line) {
    problems.add(line);
  }

  /** {@code key} now holds a value read from {@code origin}. */
  void read(String key, String origin) {
    unreadable.remove(key);
    origins.put(key, origin);
  }

  /** The value {@code origin} gives {@code key} could not be read; the key keeps its earlier value. */
  void unreadable(String key, String message, String origin) {
    unreadable.add(key);
    problems.add(key + ": " + message + " (" + origin + ")");
  }

  /** True when the latest value given to {@code key} could not be read. */
  boolean isUnreadable(String key) {
    return unreadable.contains(key);
  }

  /**
   * {@code key}'s value is invalid: {@code text} says why; skipped when the value was unreadable.
   *
   * @throws IllegalArgumentException when {@code key} is not a declared key (a rule naming it wrongly)
   */
  void invalid(String key, String text) {
    if (!ConfigKey.BY_PATH.containsKey(key)) {
      throw new IllegalArgumentException("not a configuration key: " + key);
    }
    if (unreadable.contains(key)) {
      return;
    }
    String origin = origins.get(key);
    problems.add(key + ": " + text + (origin == null ? "" : " (" + origin + ")"));
  }

  /**
   * Ends the load.
   *
   * @throws ConfigException listing every problem, when there is one
   */
  void throwIfAny() throws ConfigException {
    if (!problems.isEmpty()) {
      throw new ConfigException(problems);
    }
  }
}
