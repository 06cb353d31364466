package io.disaggusage.extproc.metrics;

import io.disaggusage.extproc.config.Config;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Bounds the {@code model} metric label: a model name comes from the request or response body, i.e.
 * from clients, so it must not be able to create unbounded time series. With an allow-list only those
 * models get their own value; without one, the first {@code maxModels} distinct models seen do. Every
 * other model is {@code other}; no model at all is {@code unknown}.
 */
public final class ModelLabels {
  public static final String OTHER = "other";
  public static final String UNKNOWN = "unknown";
  private static final int MAX_LABEL_LENGTH = 128;

  private final Set<String> allowList;
  private final int maxModels;
  private final Set<String> admitted = ConcurrentHashMap.newKeySet();

  public ModelLabels(Config.Metrics config) {
    this.allowList = Set.copyOf(config.models());
    this.maxModels = config.maxModels();
  }

  /** The label value to use for {@code model}. */
  public String label(String model) {
    if (model == null || model.isEmpty()) {
      return UNKNOWN;
    }
    if (!allowList.isEmpty()) {
      return allowList.contains(model) ? model : OTHER;
    }
    if (admitted.contains(model)) {
      return model;
    }
    if (model.length() > MAX_LABEL_LENGTH || admitted.size() >= maxModels) {
      return OTHER;
    }
    synchronized (admitted) {
      if (admitted.size() < maxModels) {
        admitted.add(model);
        return model;
      }
    }
    return admitted.contains(model) ? model : OTHER;
  }
}
