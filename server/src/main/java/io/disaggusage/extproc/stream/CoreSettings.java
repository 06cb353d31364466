package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.ClassificationRules;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.rewrite.BodyLimits;

/** The core's settings as the configuration gives them: the core knows no configuration keys. */
public final class CoreSettings {
  private CoreSettings() {}

  /** {@code classification.*} and {@code limits.max_key_bytes}. */
  public static ClassificationRules classification(Config config) {
    Config.Classification c = config.classification();
    return ClassificationRules.of(
        c.contextClusters(),
        c.generationClusters(),
        c.paths(),
        config.limits().maxKeyBytes(),
        c.trustIdHeader(),
        c.phaseHeader());
  }

  /** {@code limits.max_body_bytes}, {@code max_event_bytes}, {@code max_usage_bytes}. */
  public static BodyLimits bodyLimits(Config config) {
    Config.Limits l = config.limits();
    return new BodyLimits(l.maxBodyBytes(), l.maxEventBytes(), l.maxUsageBytes());
  }
}
