package io.disaggusage.extproc.edge;

import java.util.Locale;

/**
 * Why a request body is not one JSON object the {@link MemberRemover} could check. The caller refuses
 * such a body rather than forward members it could not see.
 */
public enum Rejection {
  /** Not JSON: a syntax error, bytes after the object, or broken encoding. */
  MALFORMED,
  /** The body ended before the object did (or was empty). */
  TRUNCATED,
  /** JSON, but its root is not an object. */
  NOT_AN_OBJECT,
  /** Nested deeper than the remover's limit. */
  TOO_DEEP,
  /** A string, name or number longer than the remover's limits, or a separator run over its hold cap. */
  TOO_LARGE;

  /** The metric label: the constant's name in lower case. */
  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }
}
