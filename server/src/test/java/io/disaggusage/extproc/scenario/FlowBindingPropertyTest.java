package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.OpenAiClientView;
import io.disaggusage.extproc.testkit.Wire;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.scenario.FlowBindingSpecificationTest.Flow;
import io.disaggusage.extproc.scenario.FlowBindingSpecificationTest.KeySource;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.driver.EnvoyStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Property (seeded, seed printed; {@code -Dbinding.seed=N} replays) through the direct driver: random
 * flows drawn onto a pool of one or two keys of a random source, their context legs answered in random
 * order with random request-body splits, then their generation legs in another random order: every
 * generation reads its own flow's numbers and the store ends empty.
 */
class FlowBindingPropertyTest extends DirectServiceFixture {
  static final long SEED = Long.getLong("binding.seed", System.nanoTime());
  static final int RUNS = 400;

  record Planned(Flow flow, String key) {}

  @Test
  void everyGenerationReadsItsOwnFlowsNumbers() throws Exception {
    System.out.println("FlowBindingPropertyTest seed " + SEED);
    Random random = new Random(SEED);
    for (int run = 0; run < RUNS; run++) {
      KeySource source = KeySource.values()[random.nextInt(KeySource.values().length)];
      List<String> keys = List.of(source.key(), source.key().replace("1", "2"));
      List<Planned> flows = new ArrayList<>();
      int n = 2 + random.nextInt(6);
      for (int i = 0; i < n; i++) {
        String prompt = "run " + run + " flow " + i + " " + "x".repeat(random.nextInt(300));
        flows.add(new Planned(
            new Flow(prompt, 10 + random.nextInt(5000), random.nextInt(10), 1 + random.nextInt(500)),
            keys.get(random.nextInt(random.nextBoolean() ? 1 : 2))));
      }
      String as = "seed " + SEED + " run " + run + " " + source;
      Collections.shuffle(flows, random);
      for (Planned p : flows) {
        Leg ctx = leg(source, p, true);
        VectorRunner.whole(envoy.open(), ctx, Chunking.random(random.nextLong(), 1 + random.nextInt(64)), Chunking.whole());
      }
      Collections.shuffle(flows, random);
      for (Planned p : flows) {
        EnvoyStream g = envoy.open();
        VectorRunner.whole(g, leg(source, p, false), Chunking.random(random.nextLong(), 1 + random.nextInt(64)), Chunking.whole());
        assertThat(g.violation()).as(as).isNull();
        assertThat(g.metadata("disagg_usage", "outcome")).as(as).isEqualTo("rewritten");
        assertThat(OpenAiClientView.chatCompletion(g.clientBodyUtf8())).as(as).isEqualTo(p.flow().truth());
      }
      assertThat(store.size()).as(as + ": store drained").isZero();
    }
  }

  private static Leg leg(KeySource source, Planned p, boolean context) {
    Flow f = p.flow();
    String response = context
        ? source.contextReply(p.key(), Wire.usage(f.promptTokens(), 1, f.cachedTokens()))
        : Wire.chatCompletion("gen", Wire.usage(f.promptTokens(), f.completionTokens(), f.promptTokens()));
    return new Leg(FlowBindingSpecificationTest.PATH, source.headers(p.key(), context, false), source.cluster(context),
        source.body(p.key(), f.prompt(), context, false), "application/json", response.getBytes(StandardCharsets.UTF_8));
  }
}
