package io.disaggusage.extproc.tools.demo;

import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;

/** One engine family, response format and order the demo runs a prompt through twice. */
record DemoScenario(DisaggEngine engine, boolean stream, ScheduleOrder order) {
  String label() {
    return engine.name() + " " + (stream ? "SSE" : "JSON") + " " + order.label();
  }
}
