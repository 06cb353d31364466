package io.disaggusage.extproc.classify;

import java.util.Collection;
import java.util.Set;

/**
 * What the {@link ExchangeClassifier} decides with: the server fills it from {@code classification.*}
 * and {@code limits.max_key_bytes}.
 *
 * @param contextClusters upstream clusters whose exchanges are context legs
 * @param generationClusters upstream clusters whose exchanges are generation legs
 * @param paths the request paths handled at all
 * @param maxKeyBytes the longest correlation key accepted
 * @param trustIdHeader whether explicit {@code x-disagg-*} headers spare the body read
 * @param phaseHeader what an {@code x-disagg-phase} header may decide
 */
public record ClassificationRules(
    Set<String> contextClusters,
    Set<String> generationClusters,
    Set<String> paths,
    int maxKeyBytes,
    boolean trustIdHeader,
    PhaseHeaderPolicy phaseHeader) {

  public ClassificationRules {
    contextClusters = Set.copyOf(contextClusters);
    generationClusters = Set.copyOf(generationClusters);
    paths = Set.copyOf(paths);
  }

  /** The rules with the shipped {@link PhaseHeaderPolicy#FALLBACK}. */
  public static ClassificationRules of(
      Collection<String> contextClusters,
      Collection<String> generationClusters,
      Collection<String> paths,
      int maxKeyBytes,
      boolean trustIdHeader) {
    return of(contextClusters, generationClusters, paths, maxKeyBytes, trustIdHeader, PhaseHeaderPolicy.FALLBACK);
  }

  public static ClassificationRules of(
      Collection<String> contextClusters,
      Collection<String> generationClusters,
      Collection<String> paths,
      int maxKeyBytes,
      boolean trustIdHeader,
      PhaseHeaderPolicy phaseHeader) {
    return new ClassificationRules(
        Set.copyOf(contextClusters),
        Set.copyOf(generationClusters),
        Set.copyOf(paths),
        maxKeyBytes,
        trustIdHeader,
        phaseHeader);
  }
}
