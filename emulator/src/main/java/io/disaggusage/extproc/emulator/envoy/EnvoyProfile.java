package io.disaggusage.extproc.emulator.envoy;

/**
 * Envoy versions whose ext_proc behaviour differs in ways the harness models.
 *
 * <ul>
 *   <li>{@link #V1_34}: spurious replies always close the stream and continue unprocessed
 *       (fail-open style), whatever {@code failure_mode_allow} says.
 *   <li>{@link #V1_36}: (1.35 and 1.36) spurious replies follow {@code failure_mode_allow}: fail-closed
 *       sends a 500 local reply.
 *   <li>{@link #V1_37}: like 1.36, plus the stream-close optimisation: the gRPC stream is closed as
 *       soon as the last reply that can be needed has been received, instead of when the HTTP
 *       stream ends.
 * </ul>
 *
 * All profiles use the 1.34+ {@code mode_override} merge rule (DEFAULT header/trailer modes keep the
 * configured value, body modes always come from the override), raw_value-only headers and never
 * send Envoy-generated local replies to the processor.
 */
public enum EnvoyProfile {
  V1_34,
  V1_36,
  V1_37;

  /** Whether a spurious reply with fail-closed configuration produces a 500 local reply. */
  public boolean spuriousRepliesFollowFailureMode() {
    return this != V1_34;
  }

  /** Whether the gRPC stream is closed right after the last needed reply. */
  public boolean closesStreamAfterLastReply() {
    return this == V1_37;
  }
}
