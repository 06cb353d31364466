package io.disaggusage.extproc.metrics;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.UsageFigures;

/**
 * A second meter {@link Metrics} reports to beside its Prometheus registry (the OTLP export). Called
 * on the exchange's thread, never with body bytes; an implementation must not block.
 */
public interface ExchangeMeter {
  /** Reports nothing. */
  ExchangeMeter NONE = new ExchangeMeter() {
    @Override
    public void exchange(Phase phase, Outcome outcome) {}

    @Override
    public void generation(String modelLabel, UsageFigures figures, Outcome outcome) {}
  };

  /** One exchange's outcome, once per exchange. */
  void exchange(Phase phase, Outcome outcome);

  /**
   * The usage a generation response carried to the client and what its worker reported, with the
   * exchange's outcome; {@code modelLabel} is already bounded ({@link ModelLabels}).
   */
  void generation(String modelLabel, UsageFigures figures, Outcome outcome);
}
