package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.json.JsonUsageScanner;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Makes a streaming OpenAI request ask for usage, as its body streams through: every byte is kept as
 * it came except for one edit, decided when the root object's closing brace is read (the first moment
 * the whole request is known).
 *
 * <ul>
 *   <li>No top-level {@code stream_options}: {@code ,"stream_options":{"include_usage":true}} is
 *       inserted before that closing brace. Nothing is held for it.
 *   <li>{@code stream_options} is an object with {@code include_usage} {@code false} or {@code null}:
 *       that value becomes {@code true}. Without {@code include_usage}: {@code "include_usage":true} is
 *       inserted after its {@code {}, but only for an SGLang request (top-level {@code bootstrap_room}),
 *       the one engine whose default is {@code false}. {@code stream_options: null} becomes
 *       {@code {"include_usage":true}}. From the start of that value to the root's closing brace the
 *       bytes are held, at most {@code maxHeldBytes} of them.
 *   <li>Nothing changes when the request is not {@code "stream": true}, is not a leg the caller wants
 *       usage for ({@link LegProbe}), already asks for usage, asks for {@code continuous_usage_stats}
 *       (adding {@code include_usage} would put usage into every content event), repeats
 *       {@code stream_options}, or is not valid JSON up to its closing brace.
 * </ul>
 *
 * <p>The output is the same for every chunking of the same body. The edit goes out as soon as the
 * closing brace is read, so the bytes after it (which must be whitespace) are checked only afterwards:
 * a body with anything else there is counted malformed although it was rewritten — it is invalid JSON
 * that the worker rejects either way. Holding the brace until the end of the body instead would lose
 * it for good if the request ended with trailers (Envoy then sends no end-of-stream body message to
 * carry it).
 *
 * <p>The body is read by the service's JSON scanner ({@link JsonUsageScanner}), which checks the syntax
 * as strictly as Jackson does: a body Jackson would reject (broken UTF-8 included) is malformed here.
 *
 * <p>Not thread-safe: one instance per request body.
 */
public final class IncludeUsageInjector implements JsonUsageScanner.Structure {

  /**
   * Tells the injector, once the whole request object has been read, whether the exchange is a leg
   * whose response the service reads (and so can take the added usage event out of).
   */
  @FunctionalInterface
  public interface LegProbe {
    boolean eligible();
  }

  static final byte[] MEMBER = ascii(",\"stream_options\":{\"include_usage\":true}");
  private static final byte[] OPTIONS = ascii("{\"include_usage\":true}");
  private static final byte[] INCLUDE = ascii("\"include_usage\":true");
  private static final byte[] INCLUDE_FIRST = ascii("\"include_usage\":true,");
  private static final byte[] TRUE = ascii("true");
  private static final int NULL_LENGTH = 4;
  private static final byte[] EMPTY = new byte[0];

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  private enum Key { STREAM, STREAM_OPTIONS, BOOTSTRAP_ROOM, INCLUDE_USAGE, CONTINUOUS_USAGE_STATS, OTHER }

  /** The value of {@code include_usage} in the last {@code stream_options} object. */
  private enum Include { ABSENT, TRUE, FALSE, NULL, OTHER }

  /** The value of the top-level {@code stream_options}. */
  private enum Options { ABSENT, OBJECT, NULL, INVALID }

  private final int maxHeldBytes;
  /** Reports the root's members and those of its {@code stream_options} object. */
  private final JsonUsageScanner scanner = new JsonUsageScanner(List.of("stream_options"), this);
  private LegProbe probe;

  // Facts read so far.
  private boolean streamTrue;
  private boolean bootstrapRoom;
  private boolean rootHasMembers;
  private Key member = Key.OTHER;
  private Key optionsMember = Key.OTHER;
  private Options options = Options.ABSENT;
  private boolean optionsOpen;
  private boolean optionsHasMembers;
  private Include include = Include.ABSENT;
  private boolean continuousUsage;
  private long includeStart;
  private long includeEnd;

  // Where things stand.
  private boolean stopped;
  private boolean injected;
  private boolean rootClosed;
  private Boolean eligibleLeg;
  private InjectionOutcome verdict;
  private InjectionOutcome outcome;

  private final ChunkRouter router = new ChunkRouter();
  private long base;
  /** Where the held stream_options value starts (absolute offset). */
  private long heldStart;

  public IncludeUsageInjector(int maxHeldBytes) {
    this.maxHeldBytes = maxHeldBytes;
  }

  /**
   * Reads one chunk and returns the bytes to forward for it: the chunk's own array when nothing
   * changed, otherwise new bytes (possibly empty while bytes are held). With {@code end}, everything
   * still held goes out and {@link #outcome()} is final. The chunk array is kept while held: the
   * caller must not modify it.
   */
  public byte[] accept(byte[] chunk, boolean end, LegProbe probe) {
    boolean injectedBefore = injected;
    try {
      this.probe = probe;
      router.begin(chunk);
      int i = 0;
      while (i < chunk.length && !stopped) {
        i = scanner.scan(chunk, i, chunk.length);
        if (scanner.event() == JsonUsageScanner.Event.ERROR) {
          router.route(scanner.eventIndex());
          giveUp(InjectionOutcome.MALFORMED);
        }
      }
      router.route(chunk.length);
      checkHeld();
      if (end) {
        if (!stopped && !scanner.complete()) {
          giveUp(InjectionOutcome.MALFORMED); // truncated, or not one JSON value
        }
        outcome = verdict;
      }
      return router.end();
    } catch (RuntimeException e) {
      // A fault here (or in the probe) must not cost the worker a byte of its request.
      stopped = true;
      injected = injectedBefore;
      verdict = InjectionOutcome.ERROR;
      if (end) {
        outcome = verdict;
      }
      return router.recover();
    } finally {
      base += chunk.length;
      this.probe = null;
    }
  }

  /**
   * Gives up on the rest of the body (the response began first, or the exchange was abandoned) and
   * returns the bytes held, unchanged, for the caller to send before the next chunk; everything after
   * passes as it comes.
   */
  public byte[] stop() {
    if (outcome != null) {
      return EMPTY;
    }
    if (rootClosed) {
      stopped = true; // decided already; only trailing whitespace was still to be checked
      outcome = verdict;
      return EMPTY;
    }
    byte[] pending = router.holding() ? router.takeHeld() : EMPTY;
    giveUp(InjectionOutcome.UNFINISHED);
    outcome = verdict;
    return pending;
  }

  /** Whether an edit went out: the response will carry a usage event the client did not ask for. */
  public boolean injected() {
    return injected;
  }

  /** What happened; null until the body ended (or {@link #stop} was called). */
  public InjectionOutcome outcome() {
    return outcome;
  }

  // ---------------------------------------------------------------------------------------------
  // Scanner events: indexes into the chunk being read, made absolute; ignored once given up.

  @Override
  public void memberName(int depth, String name) {
    if (stopped) {
      return;
    }
    if (depth == 1) {
      rootHasMembers = true;
      member = key(name);
    } else if (depth == 2 && optionsOpen) {
      optionsHasMembers = true;
      optionsMember = key(name);
    }
  }

  private static Key key(String name) {
    if (name == null) {
      return Key.OTHER;
    }
    return switch (name) {
      case "stream" -> Key.STREAM;
      case "stream_options" -> Key.STREAM_OPTIONS;
      case "bootstrap_room" -> Key.BOOTSTRAP_ROOM;
      case "include_usage" -> Key.INCLUDE_USAGE;
      case "continuous_usage_stats" -> Key.CONTINUOUS_USAGE_STATS;
      default -> Key.OTHER;
    };
  }

  @Override
  public void valueStart(int depth, int first, int index) {
    if (stopped) {
      return;
    }
    long pos = base + index;
    if (depth == 1) {
      switch (member) {
        case STREAM -> streamTrue = false; // set by the literal's end when it is true
        case BOOTSTRAP_ROOM -> bootstrapRoom = true;
        case STREAM_OPTIONS -> optionsValue(first, pos);
        default -> {}
      }
    } else if (depth == 2 && optionsOpen) {
      if (optionsMember == Key.INCLUDE_USAGE) {
        include = Include.OTHER; // until a literal says otherwise
        includeStart = pos;
      } else if (optionsMember == Key.CONTINUOUS_USAGE_STATS) {
        continuousUsage = false;
      }
    }
  }

  private void optionsValue(int first, long pos) {
    if (options != Options.ABSENT) {
      // Parsers disagree on which of two keys counts; whatever was decided must not stand.
      router.route(index(pos));
      injected = false;
      giveUp(InjectionOutcome.AMBIGUOUS);
      return;
    }
    options = first == '{' ? Options.OBJECT : first == 'n' ? Options.NULL : Options.INVALID;
    if (options == Options.INVALID) {
      return;
    }
    optionsOpen = first == '{';
    router.route(index(pos));
    router.hold(pos);
    heldStart = pos;
  }

  @Override
  public void literalEnd(int depth, int first, int index) {
    if (stopped) {
      return;
    }
    long end = base + index;
    if (depth == 1 && member == Key.STREAM) {
      streamTrue = first == 't';
    } else if (depth == 2 && optionsOpen && optionsMember == Key.INCLUDE_USAGE) {
      include = first == 't' ? Include.TRUE : first == 'f' ? Include.FALSE : Include.NULL;
      includeEnd = end;
    } else if (depth == 2 && optionsOpen && optionsMember == Key.CONTINUOUS_USAGE_STATS) {
      continuousUsage = first == 't';
    }
  }

  @Override
  public void containerEnd(int depth, int index) {
    if (stopped) {
      return;
    }
    long pos = base + index;
    if (depth == 1 && optionsOpen) {
      optionsOpen = false;
      if (!wantsEdit()) {
        router.route(index(pos + 1));
        router.release(); // asks for usage already, or cannot be edited: nothing to wait for
      }
    } else if (depth == 0) {
      rootClosed = true;
      router.route(index(pos));
      if (!checkHeld()) {
        return; // the held part went over its cap just now
      }
      if (router.holding()) {
        decide();
      } else if (options == Options.ABSENT && eligibleStream()) {
        router.insert(MEMBER, rootHasMembers ? 0 : 1);
        injected = true;
      }
      verdict = injected ? InjectionOutcome.INJECTED : explain();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Decisions

  /** Whether the stream_options value, as read, would need an edit to ask for usage. */
  private boolean wantsEdit() {
    if (options == Options.NULL) {
      return true;
    }
    return !continuousUsage && (include == Include.FALSE || include == Include.NULL || include == Include.ABSENT);
  }

  /** Whether the request, now complete, is a streaming leg whose response the service reads. */
  private boolean eligibleStream() {
    return streamTrue && eligibleLeg();
  }

  /** The probe's answer, asked once (it classifies the whole request). */
  private boolean eligibleLeg() {
    if (eligibleLeg == null) {
      eligibleLeg = probe != null && probe.eligible();
    }
    return eligibleLeg;
  }

  /** Decides about the held stream_options value at the root's end: edits it or not, and releases it. */
  private void decide() {
    boolean engineDefault = options == Options.OBJECT && include == Include.ABSENT && !bootstrapRoom;
    release(wantsEdit() && !engineDefault && eligibleStream());
  }

  /** Why a body whose root closed was not rewritten. */
  private InjectionOutcome explain() {
    if (!eligibleLeg()) {
      return InjectionOutcome.OTHER_LEG;
    }
    if (!streamTrue) {
      return InjectionOutcome.NOT_STREAMING;
    }
    if (options == Options.INVALID || (options == Options.OBJECT && include == Include.OTHER)) {
      return InjectionOutcome.MALFORMED;
    }
    if (include == Include.TRUE) {
      return InjectionOutcome.CLIENT_ASKED;
    }
    if (continuousUsage) {
      return InjectionOutcome.CONTINUOUS_USAGE;
    }
    return InjectionOutcome.ENGINE_DEFAULT;
  }

  // ---------------------------------------------------------------------------------------------
  // Bytes

  private int index(long pos) {
    return (int) (pos - base);
  }

  /** False (and given up) when the held bytes have gone over their cap. */
  private boolean checkHeld() {
    if (router.heldBytes() > maxHeldBytes) {
      giveUp(InjectionOutcome.OVERSIZE);
      return false;
    }
    return !stopped;
  }

  /** Sends the held bytes out, with the edit that asks for usage when {@code edit}. */
  private void release(boolean edit) {
    if (!edit) {
      router.release();
    } else if (options == Options.NULL) {
      router.release(heldStart, heldStart + NULL_LENGTH, OPTIONS);
    } else if (include == Include.ABSENT) {
      router.release(heldStart + 1, heldStart + 1, optionsHasMembers ? INCLUDE_FIRST : INCLUDE);
    } else {
      router.release(includeStart, includeEnd, TRUE);
    }
    injected |= edit;
  }

  /** Stops rewriting (once): what is held goes out unchanged, the rest passes as it comes. */
  private void giveUp(InjectionOutcome reason) {
    if (stopped) {
      return;
    }
    router.release();
    stopped = true;
    verdict = reason;
  }
}
