package io.disaggusage.extproc.usage;

import io.disaggusage.extproc.json.ByteEdits;
import io.disaggusage.extproc.json.JsonObjectView.Member;
import io.disaggusage.extproc.json.JsonObjectView;
import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The Anthropic Messages API ({@code /v1/messages}) and its rewrite rule (behaviour.md, "Anthropic
 * Messages"). Usage sits at the root ({@code message_delta}, JSON bodies) and inside {@code message}
 * ({@code message_start}); there is no details object: the cache counts are top-level members.
 * Anthropic's {@code input_tokens} counts only the input neither read from nor written to the cache,
 * so the prompt is split three ways: {@code input_tokens + cache_read_input_tokens +
 * cache_creation_input_tokens} is the whole prompt. All three come from the context worker ({@code C}),
 * {@code output_tokens} from the generation worker ({@code G}); there is no total. The three prompt
 * counts always add up to C's prompt, so a client's sum is right whichever members it reads.
 */
final class MessagesShape implements ApiShape {
  private static final String INPUT = "input_tokens";
  private static final String OUTPUT = "output_tokens";
  /** Input tokens read from the prompt cache. */
  static final String CACHE_READ = "cache_read_input_tokens";
  /** Input tokens written to the prompt cache. */
  static final String CACHE_CREATION = "cache_creation_input_tokens";

  MessagesShape() {}

  @Override
  public boolean serves(String path) {
    return path.endsWith("/messages");
  }

  @Override
  public Set<String> usageContainers() {
    return Set.of("message");
  }

  @Override
  public Set<String> usageDetailObjects() {
    return Set.of();
  }

  @Override
  public String promptMember() {
    return INPUT;
  }

  /** An object stating {@code input_tokens} and a cache count (without one it reads as Responses). */
  @Override
  public boolean recognises(Set<String> usageMembers) {
    return usageMembers.contains(INPUT)
        && (usageMembers.contains(CACHE_READ) || usageMembers.contains(CACHE_CREATION));
  }

  /**
   * Like every handled path but the Responses API's (behaviour.md, "Request headers"): the request
   * body is read, and edited only when it streams without asking for usage the OpenAI way.
   */
  @Override
  public boolean injectsIncludeUsage() {
    return true;
  }

  @Override
  public UsageRule.Result apply(ContextUsage c, JsonObjectView g, byte[] doc, boolean addMembers) {
    if (c != null && c.claimed()) {
      c = null; // a ctx_usage is TensorRT-LLM's, which serves no Messages API: a client wrote this one
    }
    Member gInput = g.get(INPUT);
    Member gOutput = g.get(OUTPUT);
    Member gRead = g.get(CACHE_READ);
    Member gCreation = g.get(CACHE_CREATION);
    if (gOutput == null) {
      return new UsageRule.Invalid(OUTPUT + " is missing");
    }
    Count input = Count.of(gInput, doc, true);
    Count readCount = Count.of(gRead, doc, true);
    Count creationCount = Count.of(gCreation, doc, true);
    Count output = Count.of(gOutput, doc, false);
    boolean impossible = !output.possible();
    for (Count count : new Count[] {input, readCount, creationCount}) {
      impossible |= count != null && !count.possible();
    }

    BigInteger prompt;
    BigInteger read;
    BigInteger creation;
    boolean split;
    if (c != null) {
      // C's split of its prompt; an unknown split (C stated no cache count) reads as "no cache".
      prompt = c.promptTokens();
      split = c.statesCache();
      read = split ? c.cachedTokens().min(prompt) : BigInteger.ZERO;
      creation =
          split && c.cacheCreationTokens() != null
              ? c.cacheCreationTokens().min(prompt.subtract(read))
              : BigInteger.ZERO;
    } else {
      // No context usage: G's own split, clamped (members G states null or lacks stay as they are).
      read = readCount == null ? null : readCount.value();
      creation = creationCount == null ? null : creationCount.value();
      prompt = input == null || input.value() == null ? null
          : input.value().add(orZero(read)).add(orZero(creation));
      split = false;
    }

    ByteEdits edits = new ByteEdits();
    if (c != null) {
      BigInteger uncached = prompt.subtract(read).subtract(creation);
      UsageRule.setCount(g, gInput, INPUT, uncached, true, edits);
      // Cache members G lacks are added only when C states its split; ones G has are always set, so
      // G's inflated cache read never survives next to C's input count.
      UsageRule.setCount(g, gRead, CACHE_READ, read, split, edits);
      UsageRule.setCount(g, gCreation, CACHE_CREATION, creation, split, edits);
    } else {
      impossible |= UsageRule.clampListed(g, List.of(INPUT, CACHE_READ, CACHE_CREATION), doc, edits);
    }
    UsageRule.setCount(g, gOutput, OUTPUT, output.value(), false, edits);
    BigInteger reported = readCount == null ? null : readCount.reported();
    BigInteger total = prompt == null ? null : prompt.add(output.value());
    return new UsageRule.Applied(
        edits, new UsageFigures(prompt, read, output.value(), total, reported), impossible);
  }

  /**
   * {@inheritDoc} Empty when {@code input_tokens} is missing or not a non-negative integer, or a
   * present non-null cache count is not one.
   */
  @Override
  public Optional<ContextUsage> context(JsonObjectView c, byte[] doc) {
    Member input = c.get(INPUT);
    Member read = c.get(CACHE_READ);
    Member creation = c.get(CACHE_CREATION);
    if (input == null || !input.isNonNegativeInteger() || !countOrNull(read) || !countOrNull(creation)) {
      return Optional.empty();
    }
    BigInteger readCount = stated(read) ? read.integer() : BigInteger.ZERO;
    BigInteger creationCount = stated(creation) ? creation.integer() : null;
    BigInteger prompt = input.integer().add(readCount).add(orZero(creationCount));
    Map<String, String> details = new LinkedHashMap<>();
    if (stated(read)) {
      details.put(OpenAiShape.CACHED, readCount.toString());
    }
    return Optional.of(new ContextUsage(prompt, details, readCount, creationCount));
  }

  @Override
  public UsageFigures figuresOf(JsonObjectView usage) {
    BigInteger input = UsageRule.integer(usage.get(INPUT));
    BigInteger read = UsageRule.integer(usage.get(CACHE_READ));
    BigInteger creation = UsageRule.integer(usage.get(CACHE_CREATION));
    BigInteger output = UsageRule.integer(usage.get(OUTPUT));
    BigInteger prompt = input == null ? null : input.add(orZero(read)).add(orZero(creation));
    BigInteger total = prompt == null || output == null ? null : prompt.add(output);
    return new UsageFigures(prompt, read, output, total, read);
  }

  /** Absent, null, or a non-negative integer: the values a count member may have. */
  private static boolean countOrNull(Member m) {
    return m == null || m.isNull() || m.isNonNegativeInteger();
  }

  private static boolean stated(Member m) {
    return m != null && !m.isNull();
  }

  private static BigInteger orZero(BigInteger n) {
    return n == null ? BigInteger.ZERO : n;
  }
}
