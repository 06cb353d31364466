package io.disaggusage.extproc.tools.sandbox;

/**
 * Where everything listens: fixed offsets from a base port, so the printed URLs are the same on every
 * run, or with base 0 whatever port the system picks for each (Envoy's own ports are then read back
 * from its admin interface).
 *
 * <pre>
 * base+0..3    orchestrators: TensorRT-LLM through, around; vLLM through, around
 * base+4       the service's ext_proc gRPC listener
 * base+5       the service's admin HTTP (/metrics)
 * base+6       Envoy's admin
 * base+10..17  Envoy listeners: per family, per passage, context then generation
 * base+20..23  workers: per family, context then generation
 * </pre>
 */
record SandboxPorts(int base) {
  /** Ports from the base on that the sandbox may use. */
  static final int SPAN = 24;

  SandboxPorts {
    if (base != 0 && (base < 1024 || base > 65535 - SPAN)) {
      throw new IllegalArgumentException(
          base + ": expected 0 (any free ports) or a port from 1024 to " + (65535 - SPAN));
    }
  }

  int orchestrator(Family family, Passage passage) {
    return at(2 * family.index() + passage.ordinal());
  }

  int serviceGrpc() {
    return at(4);
  }

  int serviceAdmin() {
    return at(5);
  }

  int envoyAdmin() {
    return at(6);
  }

  int envoyListener(Family family, Passage passage, Leg leg) {
    return at(10 + 4 * family.index() + 2 * passage.ordinal() + leg.ordinal());
  }

  int worker(Family family, Leg leg) {
    return at(20 + 2 * family.index() + leg.ordinal());
  }

  private int at(int offset) {
    return base == 0 ? 0 : base + offset;
  }
}
