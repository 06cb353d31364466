package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.emulator.envoy.EnvoyProfile;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.store.ContextUsageStore;
import io.disaggusage.extproc.store.RedisContextUsageStore;
import io.disaggusage.extproc.store.RedisServer;
import io.disaggusage.extproc.store.RedisStores;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

/**
 * The service as one cell of the {@link ExchangeSpecificationTest} matrix deploys it: one replica on the
 * memory store, or two replicas sharing one Redis (the context leg on the first, the generation leg on
 * the second), each driven by the chosen {@link Driver}. Outlives a test: a flow drains what it
 * stores, so cases run one after another on the same deployment and read metrics as deltas.
 */
final class Deployment implements AutoCloseable {
  /** What plays Envoy's side. */
  enum Driver {
    /** {@link DirectEnvoy}: ext_proc messages straight into the service object, no transport. */
    DIRECT,
    /** {@link io.disaggusage.extproc.emulator.envoy.FakeEnvoy}: the ext_proc filter's behaviour over in-process gRPC, shipped filter configuration. */
    FAKE_ENVOY
  }

  /** Where context usage is kept between the legs. */
  enum Store {
    MEMORY,
    /** Two replicas, each with its own store on one redis-server. */
    REDIS_REPLICAS
  }

  /** One replica: its store and metrics, and the driver's end of it. */
  record Replica(ContextUsageStore store, Metrics metrics, DirectEnvoy direct, ServiceUnderTest fake, ScheduledExecutorService timer)
      implements AutoCloseable {
    /** Entries left behind: Redis counts the keys under this deployment's prefix, whichever replica wrote them. */
    long entries() {
      return store instanceof RedisContextUsageStore redis ? redis.countEntries().join() : store.size();
    }

    @Override
    public void close() throws Exception {
      if (fake != null) {
        fake.close();
        return;
      }
      ExchangeLedger.retire(direct);
      store.close();
      timer.shutdownNow();
    }
  }

  /**
   * Redis's command timeout here: well above the default 50 ms, so that a loaded test machine stalling a
   * command is not taken for Redis failing (what a timeout does is {@link RedisReplicasScenarioTest}'s);
   * below the fake Envoy's message timeout, which a context reply waiting for its write must meet.
   */
  static final Duration REDIS_TIMEOUT = Duration.ofMillis(500);

  final Driver driver;
  final Replica context;
  final Replica generation;

  private Deployment(Driver driver, Replica context, Replica generation) {
    this.driver = driver;
    this.context = context;
    this.generation = generation;
  }

  /** Deploys the service; {@code redis} is used (with a key prefix of its own) for {@link Store#REDIS_REPLICAS}. */
  static Deployment open(Driver driver, Store store, RedisServer redis) throws Exception {
    if (store == Store.MEMORY) {
      Replica one = replica(driver, ServiceUnderTest.testConfig(), ServiceUnderTest.MEMORY_STORE);
      return new Deployment(driver, one, one);
    }
    Config config = RedisReplicasScenarioTest.config(redis.uri(), RedisStores.freshPrefix(), REDIS_TIMEOUT);
    return new Deployment(driver, replica(driver, config, Deployment::redisStore), replica(driver, config, Deployment::redisStore));
  }

  private static ContextUsageStore redisStore(Config c, ScheduledExecutorService timer) {
    return RedisStores.openReady(
        new RedisContextUsageStore.Settings(
            c.store().redisUri(), c.store().redisCluster(), c.store().keyPrefix(), c.store().ttl(), c.store().redisTimeout()),
        timer);
  }

  private static Replica replica(Driver driver, Config config, ServiceUnderTest.StoreFactory stores) throws Exception {
    if (driver == Driver.FAKE_ENVOY) {
      ServiceUnderTest s = new ServiceUnderTest(config, ServiceUnderTest.Transport.IN_PROCESS, EnvoyProfile.V1_37, stores, ExtProcService::new);
      return new Replica(s.store, s.metrics, null, s, s.timer);
    }
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    ContextUsageStore store = stores.open(config, timer);
    Metrics metrics = Metrics.standalone();
    DirectEnvoy direct = new DirectEnvoy(new ExtProcService(config, store, metrics, timer));
    ExchangeLedger.serve(direct, metrics);
    return new Replica(store, metrics, direct, null, timer);
  }

  /** Runs {@code v} with its bodies cut as {@code splits} says: what the client of each leg got. */
  Seen run(Vector v, Splits splits) {
    if (driver == Driver.DIRECT) {
      VectorRunner.Outcome o = VectorRunner.run(context.direct, generation.direct, v, splits);
      return new Seen(o.context() == null ? null : LegSeen.of(o.context()), LegSeen.of(o.generation()));
    }
    ExchangeResult[] r = VectorExchanges.run(context.fake.envoy, generation.fake.envoy, v, splits);
    return new Seen(r[0] == null ? null : LegSeen.of(r[0]), LegSeen.of(r[1]));
  }

  /** Both legs as seen; the context null when the generation request carried the context usage. */
  record Seen(LegSeen context, LegSeen generation) {}

  List<Replica> replicas() {
    return context == generation ? List.of(context) : List.of(context, generation);
  }

  @Override
  public void close() throws Exception {
    for (Replica r : replicas()) {
      r.close();
    }
  }

  @Override
  public String toString() {
    return driver + " " + (context == generation ? "one replica" : "two replicas");
  }
}
