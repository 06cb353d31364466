package io.disaggusage.extproc.emulator.engines;

/** In which order an orchestrator runs its two calls (behaviour.md §4). */
public enum ScheduleOrder {
  /** The context response is complete before the generation request is sent. */
  CONTEXT_FIRST("context-first"),
  /** Both calls are made up front; the generation response may end before the context response. */
  GENERATION_FIRST("generation-first");

  private final String label;

  ScheduleOrder(String label) {
    this.label = label;
  }

  public String label() {
    return label;
  }
}
