package io.disaggusage.bench.jmh;

import io.disaggusage.bench.Bodies;
import io.disaggusage.bench.Fixtures;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import java.util.List;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * SSE framing and rewriting through the generation processor ({@code ProcessorFactory.generation(true,…)}),
 * context usage known, chunks of 1–16 KiB cut at arbitrary bytes. One operation is one whole stream.
 */
@State(Scope.Thread)
public class SseBench {
  /** Events per stream in the pass-through and continuous-usage benchmarks. */
  public static final int EVENTS = 400;

  ProcessorFactory factory;
  List<byte[]> passThrough;
  List<byte[]> continuousUsage;
  List<byte[]> finalUsage;
  public static final int PASS_THROUGH_BYTES = Bodies.contentOnly(EVENTS, 1).length;

  @Setup(Level.Trial)
  public void setUp() {
    factory = Fixtures.processors();
    passThrough = Bodies.chunks(Bodies.contentOnly(EVENTS, 1), 1024, 16 * 1024, 7);
    continuousUsage = Bodies.chunks(Bodies.continuousUsageStream(EVENTS, 2), 1024, 16 * 1024, 7);
    finalUsage = List.of(Bodies.usageEvent());
  }

  /** Content events with no usage: framed and forwarded ({@value #EVENTS} events per op). */
  @Benchmark
  public long passThrough() {
    return Fixtures.generation(factory, true, passThrough);
  }

  /** A usage object in every event, each rewritten ({@value #EVENTS} events plus [DONE] per op). */
  @Benchmark
  public long continuousUsage() {
    return Fixtures.generation(factory, true, continuousUsage);
  }

  /** The final usage event of a stream, alone in its chunk (one event per op). */
  @Benchmark
  public long finalUsageEvent() {
    return Fixtures.generation(factory, true, finalUsage);
  }
}
