package io.disaggusage.extproc.edge;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The members a {@link MemberRemover} takes out, as paths of member names from the root object:
 * {@code kv_transfer_params} is the root's member, {@code vllm_xargs.kv_transfer_params} the member of
 * the root's {@code vllm_xargs} object. Names are compared decoded, exactly. Immutable.
 */
public final class MemberPaths {

  /**
   * What only the P/D machinery may set: vLLM's KV hand-off ({@code kv_transfer_params}, also where
   * vLLM's {@code vllm_xargs} and {@code sampling_params.extra_args} carry it), TensorRT-LLM's
   * {@code disaggregated_params}, SGLang's bootstrap triple.
   */
  public static final List<String> DEFAULTS =
      List.of(
          "kv_transfer_params",
          "disaggregated_params",
          "bootstrap_host",
          "bootstrap_port",
          "bootstrap_room",
          "vllm_xargs.kv_transfer_params",
          "sampling_params.extra_args.kv_transfer_params");

  /** One object level of the trie: the names to remove here, and the names whose objects hold more. */
  static final class Node {
    final Map<String, String> removed = new HashMap<>(); // name -> its full dotted path
    final Map<String, Node> children = new HashMap<>();

    /** The full path of member {@code name} when it is removed here, else null. */
    String removedPath(String name) {
      return removed.get(name);
    }

    /** The level below member {@code name}, or null when nothing under it is removed. */
    Node child(String name) {
      return children.get(name);
    }
  }

  private final Node root = new Node();
  private final List<String> paths;

  private MemberPaths(List<String> paths) {
    this.paths = Collections.unmodifiableList(new ArrayList<>(paths));
  }

  /** The {@link #DEFAULTS}. */
  public static MemberPaths defaults() {
    return of(DEFAULTS);
  }

  /**
   * Paths written with {@code .} between names.
   *
   * @throws IllegalArgumentException for an empty list, an empty name, or a path under one already
   *     removed whole (it could never match)
   */
  public static MemberPaths of(List<String> dotted) {
    if (dotted.isEmpty()) {
      throw new IllegalArgumentException("no member paths");
    }
    Set<String> unique = new LinkedHashSet<>(dotted);
    MemberPaths paths = new MemberPaths(List.copyOf(unique));
    for (String path : unique) {
      paths.add(path);
    }
    for (String path : unique) {
      paths.checkReachable(path);
    }
    return paths;
  }

  /** Why {@code dotted} is not a path, or null when it is one. */
  public static String problem(String dotted) {
    if (dotted.isEmpty()) {
      return "an empty path";
    }
    for (String name : dotted.split("\\.", -1)) {
      if (name.isEmpty()) {
        return "an empty member name in \"" + dotted + "\"";
      }
    }
    return null;
  }

  private void add(String dotted) {
    String problem = problem(dotted);
    if (problem != null) {
      throw new IllegalArgumentException(problem);
    }
    String[] names = dotted.split("\\.", -1);
    Node node = root;
    for (int i = 0; i < names.length - 1; i++) {
      node = node.children.computeIfAbsent(names[i], n -> new Node());
    }
    node.removed.put(names[names.length - 1], dotted);
  }

  private void checkReachable(String dotted) {
    String[] names = dotted.split("\\.", -1);
    Node node = root;
    for (int i = 0; i < names.length - 1; i++) {
      if (node.removedPath(names[i]) != null) {
        throw new IllegalArgumentException(
            "\"" + dotted + "\" lies under \"" + node.removedPath(names[i]) + "\", which is removed whole");
      }
      node = node.child(names[i]);
    }
  }

  Node root() {
    return root;
  }

  /** The paths, dotted, in the order given (duplicates once). */
  public List<String> paths() {
    return paths;
  }

  @Override
  public String toString() {
    return String.join(", ", paths);
  }
}
