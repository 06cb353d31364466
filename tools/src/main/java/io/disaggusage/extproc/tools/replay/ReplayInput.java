package io.disaggusage.extproc.tools.replay;

import java.util.Optional;

/**
 * The exchanges to replay: the generation leg, and the context leg unless the generation leg carries
 * its context usage itself (or is replayed alone to check a pass-through).
 *
 * @param context null when there is no context leg
 */
public record ReplayInput(ReplayLeg context, ReplayLeg generation) {
  public Optional<ReplayLeg> contextLeg() {
    return Optional.ofNullable(context);
  }
}
