package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.driver.EnvoyStream;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;

/** What a driver tells about one leg of a vector: the client's bytes, the outcome metadata, the protocol's health. */
interface LegSeen {
  /** The namespace of the service's dynamic metadata. */
  String NAMESPACE = "disagg_usage";

  byte[] clientBody();

  /** A value of the service's dynamic metadata, null when unset. */
  String metadata(String key);

  /** Fails when the exchange was not clean as the driver can tell (reset, local reply, replies owed, fail-open …). */
  void assertClean();

  /** Fails unless the worker got {@code leg}'s request as the orchestrator sent it; a driver without an upstream cannot tell. */
  void assertUpstreamGot(Leg leg);

  static LegSeen of(EnvoyStream s) {
    return new LegSeen() {
      @Override
      public byte[] clientBody() {
        return s.clientBody();
      }

      @Override
      public String metadata(String key) {
        return s.metadata(NAMESPACE, key);
      }

      @Override
      public void assertClean() {
        assertThat(s.violation()).as("protocol violation").isNull();
        assertThat(s.owed()).as("replies still owed").isZero();
      }

      @Override
      public void assertUpstreamGot(Leg leg) {
        // The direct driver has no upstream: the request body's fate is the fake Envoy's to check.
      }
    };
  }

  static LegSeen of(ExchangeResult r) {
    return new LegSeen() {
      @Override
      public byte[] clientBody() {
        return r.clientResponse().body();
      }

      @Override
      public String metadata(String key) {
        String v = r.accessLog("%DYNAMIC_METADATA(" + NAMESPACE + ":" + key + ")%");
        return v.equals("-") ? null : v;
      }

      @Override
      public void assertClean() {
        Flows.assertClean(r);
      }

      @Override
      public void assertUpstreamGot(Leg leg) {
        assertThat(r.upstreamRequest().body()).as("upstream request body").isEqualTo(leg.requestBody());
        leg.requestHeaders().forEach(
            (name, value) -> assertThat(r.upstreamRequest().headers().get(name)).as("upstream " + name).contains(value));
      }
    };
  }
}
