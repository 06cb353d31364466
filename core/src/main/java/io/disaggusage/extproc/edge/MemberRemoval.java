package io.disaggusage.extproc.edge;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;

/**
 * What every {@link MemberRemover} of one configuration shares: the paths, the limits and the Jackson
 * factory its non-blocking parsers come from. Thread-safe; make one and {@link #start} a remover per
 * request body.
 */
public final class MemberRemoval {

  /**
   * The bounds of one body's read, which bound its memory: Jackson holds one string, name or number
   * at a time (a string is decoded whole before it is a token), the remover at most {@code
   * maxHeldBytes} between a member and the next name.
   *
   * @param maxDepth deepest nesting accepted; Python's {@code json} stops near 1000 (its recursion
   *     limit), so that is the default
   * @param maxStringBytes longest string value accepted, in UTF-8 bytes (checked in chars, which are
   *     never more)
   * @param maxHeldBytes longest run held back undecided: the separator after a member and the next
   *     member's name, in an object that may hold removed members
   */
  public record Limits(int maxDepth, int maxStringBytes, int maxHeldBytes) {
    /** Python's depth, 16 MiB strings, 64 KiB held. */
    public static final Limits DEFAULTS = new Limits(1000, 16 << 20, 64 << 10);

    public Limits {
      if (maxDepth < 1 || maxStringBytes < 1 || maxHeldBytes < 1) {
        throw new IllegalArgumentException("limits must be positive: " + maxDepth + ", " + maxStringBytes + ", " + maxHeldBytes);
      }
    }
  }

  /**
   * Longest number accepted, in chars. Python reads integers of up to 4300 digits and floats of any
   * length; Jackson's default of 1000 would refuse some of what Python accepts.
   */
  static final int MAX_NUMBER_CHARS = 10_000;

  private final MemberPaths paths;
  private final Limits limits;
  private final JsonFactory json;

  public MemberRemoval(MemberPaths paths, Limits limits) {
    this.paths = paths;
    this.limits = limits;
    this.json =
        JsonFactory.builder()
            // Python's json reads NaN, Infinity and -Infinity; a body the engine reads must not be refused
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            // names are the client's: no shared symbol table that every distinct name would grow
            .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
            .streamReadConstraints(
                StreamReadConstraints.builder()
                    .maxNestingDepth(limits.maxDepth())
                    .maxStringLength(limits.maxStringBytes())
                    .maxNumberLength(MAX_NUMBER_CHARS)
                    .build())
            .build();
  }

  /** The defaults: {@link MemberPaths#DEFAULTS} and {@link Limits#DEFAULTS}. */
  public static MemberRemoval defaults() {
    return new MemberRemoval(MemberPaths.defaults(), Limits.DEFAULTS);
  }

  /** A remover for one request body. */
  public MemberRemover start() {
    return new MemberRemover(json, paths.root(), limits);
  }

  public MemberPaths paths() {
    return paths;
  }

  public Limits limits() {
    return limits;
  }
}
