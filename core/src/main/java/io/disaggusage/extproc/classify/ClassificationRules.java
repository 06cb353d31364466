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
 */
public record ClassificationRules(
    Set<String> contextClusters,
    Set<String> generationClusters,
    Set<String> paths,
    int maxKeyBytes,
    boolean trustIdHeader) {

  public ClassificationRules {
    contextClusters = Set.copyOf(contextClusters);
    generationClusters = Set.copyOf(generationClusters);
    paths = Set.copyOf(paths);
  }

  public static ClassificationRules of(
      Collection<String> contextClusters,
      Collection<String> generationClusters,
      Collection<String> paths,
      int maxKeyBytes,
      boolean trustIdHeader) {
    return new ClassificationRules(
        Set.copyOf(contextClusters), Set.copyOf(generationClusters), Set.copyOf(paths), maxKeyBytes, trustIdHeader);
  }
}
