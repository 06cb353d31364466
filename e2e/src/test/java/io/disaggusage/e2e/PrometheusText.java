package io.disaggusage.e2e;

/** Reads samples out of the Prometheus text format the service's {@code /metrics} answers. */
final class PrometheusText {
  private PrometheusText() {}

  /** The sum of every sample of {@code metric} whose label set contains each of {@code labels}. */
  static double sum(String text, String metric, String... labels) {
    double sum = 0;
    for (String line : text.split("\n")) {
      if (line.startsWith("#") || !(line.startsWith(metric + "{") || line.startsWith(metric + " "))) {
        continue;
      }
      boolean all = true;
      for (String label : labels) {
        all &= line.contains(label);
      }
      if (all) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return sum;
  }
}
