package io.disaggusage.extproc.emulator.engines;

import java.util.Locale;

/** In which order an orchestrator runs its two calls (behaviour.md §4). */
public enum ScheduleOrder {
  /** The context response is complete before the generation request is sent. */
  CONTEXT_FIRST,
  /** Both calls are made up front; the generation response may end before the context response. */
  GENERATION_FIRST;

  /** How a demo names the order: {@code context-first} or {@code generation-first}. */
  public String label() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
