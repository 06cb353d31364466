package io.disaggusage.extproc.label;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.inject.InjectionOutcome;
import io.disaggusage.extproc.inject.UsageRemoval;
import io.disaggusage.extproc.usage.UsageFields;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The labels are wire values (metric label values, dynamic metadata, the documented usage table): this
 * pins each one to the text it had when it was written beside its constant.
 */
class LowerCaseLabelTest {

  @Test
  void phasesAreLabelledAsMetricsShowThem() {
    assertThat(labels(Phase.values())).containsExactly("context", "generation", "none");
  }

  @Test
  void outcomesAreLabelledAsMetricsShowThem() {
    assertThat(labels(Outcome.values()))
        .containsExactly(
            "rewritten",
            "stored",
            "passthrough_no_context",
            "context_timeout",
            "fingerprint_mismatch",
            "oversize",
            "parse_error",
            "no_usage",
            "not_disaggregated",
            "error",
            "reset",
            "impossible_count",
            "envoy_gave_up");
  }

  @Test
  void injectionOutcomesAreLabelledAsMetricsShowThem() {
    assertThat(labels(InjectionOutcome.values()))
        .containsExactly(
            "injected",
            "client_asked",
            "not_streaming",
            "other_leg",
            "engine_default",
            "continuous_usage",
            "msgpack",
            "unsupported_encoding",
            "malformed",
            "ambiguous",
            "oversize",
            "unfinished",
            "error");
  }

  @Test
  void usageRemovalsAndLegsAreLabelledAsDocumented() {
    assertThat(labels(UsageRemoval.values())).containsExactly("removed", "absent", "leaked");
    assertThat(labels(UsageFields.Leg.values())).containsExactly("context", "generation", "computed");
  }

  @Test
  void theSameLabelObjectIsReturnedEachTime() {
    // Labels are read on every exchange: they are worked out once, not on each call.
    assertThat(Outcome.PASSTHROUGH_NO_CONTEXT.label()).isSameAs(Outcome.PASSTHROUGH_NO_CONTEXT.label());
  }

  private static List<String> labels(LowerCaseLabel[] constants) {
    return Arrays.stream(constants).map(LowerCaseLabel::label).toList();
  }
}
