package io.disaggusage.extproc.emulator.engines;

import java.nio.charset.StandardCharsets;

/**
 * A worker's HTTP response, plus what the simulator knows to be true about it (not on the wire).
 *
 * @param truth the worker's real token accounting: for a context worker the prefix cache's answer,
 *     for a generation worker its prompt and output (its reported cached count is the bug, not this)
 */
public record WorkerReply(int status, String contentType, byte[] body, TokenCounts truth) {
  public WorkerReply {
    body = body.clone();
  }

  @Override
  public byte[] body() {
    return body.clone();
  }

  /**
   * A reply as the orchestrator reads it off the wire, where the truth is not known (its counts are
   * {@link TokenCounts#UNKNOWN}).
   */
  public static WorkerReply received(int status, String contentType, byte[] body) {
    return new WorkerReply(status, contentType, body, TokenCounts.UNKNOWN);
  }

  public String bodyUtf8() {
    return new String(body, StandardCharsets.UTF_8);
  }

  /**
   * Token counts.
   *
   * @param cached prompt tokens whose KV came from the worker's own prefix cache
   */
  public record TokenCounts(long prompt, long cached, long completion) {
    /** Counts nobody knows: -1 each. */
    public static final TokenCounts UNKNOWN = new TokenCounts(-1, -1, -1);
  }
}
