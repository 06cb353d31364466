package io.disaggusage.extproc.testkit;

import io.disaggusage.extproc.testkit.AnthropicClientView.MessagesUsage;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import java.util.List;

/**
 * What a vector's generation exchange must end with besides its exact bytes: the usages the client's
 * SDK reads from them, and the corrected figures the service reports as dynamic metadata (and counts
 * in its token metrics).
 *
 * @param read how the client reads the body
 * @param clientUsages every usage the SDK reads, in order
 * @param prompt the prompt tokens reported ({@code prompt_tokens} metadata)
 * @param cached the corrected cached tokens ({@code cached_tokens})
 * @param completion the completion tokens ({@code completion_tokens}); total is prompt + completion
 * @param reportedCached what the generation worker reported as cached ({@code reported_cached_tokens}); null
 *     when it reported no cached count
 * @param corrected whether any byte changed ({@code corrected})
 * @param outcome the generation exchange's outcome ({@code outcome} metadata and metric label)
 */
public record ExpectedUsage(
    SdkRead read,
    List<Object> clientUsages,
    long prompt,
    long cached,
    long completion,
    Long reportedCached,
    boolean corrected,
    String outcome) {

  public ExpectedUsage {
    clientUsages = List.copyOf(clientUsages);
  }

  /** A generation exchange the rule was applied to ({@code rewritten}). */
  public ExpectedUsage(
      SdkRead read, List<Object> clientUsages, long prompt, long cached, long completion, Long reportedCached, boolean corrected) {
    this(read, clientUsages, prompt, cached, completion, reportedCached, corrected, "rewritten");
  }

  /** The same, for a generation usage that held a count that cannot be true ({@code impossible_count}). */
  public ExpectedUsage impossible() {
    return new ExpectedUsage(read, clientUsages, prompt, cached, completion, reportedCached, corrected, "impossible_count");
  }

  /** A corrected OpenAI response: the SDK reads {@code usages}. */
  public static ExpectedUsage corrected(
      SdkRead read, long prompt, long cached, long completion, long reportedCached, ClientUsage... usages) {
    return new ExpectedUsage(read, List.of((Object[]) usages), prompt, cached, completion, reportedCached, true);
  }

  /** An OpenAI response that already carried the right count: it passes byte for byte, still rewritten. */
  public static ExpectedUsage alreadyRight(SdkRead read, long prompt, long cached, long completion, ClientUsage... usages) {
    return new ExpectedUsage(read, List.of((Object[]) usages), prompt, cached, completion, cached, false);
  }

  /** A corrected Anthropic Messages response. */
  public static ExpectedUsage corrected(
      SdkRead read, long prompt, long cached, long completion, long reportedCached, MessagesUsage usage) {
    return new ExpectedUsage(read, List.of(usage), prompt, cached, completion, reportedCached, true);
  }

  /** The total the metadata reports. */
  public long total() {
    return prompt + completion;
  }
}
