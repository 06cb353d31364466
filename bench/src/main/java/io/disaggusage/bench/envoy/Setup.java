package io.disaggusage.bench.envoy;

/** What sits between Envoy's filter chain and the workers in one configuration of the benchmark. */
enum Setup {
  /** The shipped bootstrap minus the ext_proc HTTP filter. */
  BARE("a", "Envoy, no ext_proc"),
  /** The shipped bootstrap with {@code NullProcessor} (streams both bodies, changes nothing) as the service. */
  NULL("b", "null ext_proc"),
  /** The shipped bootstrap with the shipped jar, started with the settings the bootstrap's header names. */
  SERVICE("c", "this service");

  final String key;
  final String label;

  Setup(String key, String label) {
    this.key = key;
    this.label = label;
  }

  boolean extProc() {
    return this != BARE;
  }

  /** "(c) this service". */
  String title() {
    return "(" + key + ") " + label;
  }
}
