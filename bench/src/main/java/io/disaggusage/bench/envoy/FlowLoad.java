package io.disaggusage.bench.envoy;

import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One measured run: {@code concurrency} closed-loop {@link FlowLane}s through one setup's Envoy. The
 * lanes start together without an inter-token delay; with one they start spread over a flow's duration,
 * so the streams stay out of step. After the warm-up (with a delay, at least one whole flow, so every
 * lane is streaming) comes the measurement window, during which CPU time is read from {@code /proc} at
 * both ends; then the lanes finish their flows and stop.
 */
final class FlowLoad {
  private final BenchStack stack;
  private final EventLoopGroup clientLoops;
  private final FlowBodies bodies;
  private int runs;

  FlowLoad(BenchStack stack, EventLoopGroup clientLoops, FlowBodies bodies) {
    this.stack = stack;
    this.clientLoops = clientLoops;
    this.bodies = bodies;
  }

  /** Runs {@code setup}; problems (never bodies) are passed to {@code problems}. */
  RunStats run(Setup setup, int concurrency, Duration delay, Duration warmup, Duration window,
      java.util.function.Consumer<Map<String, Long>> problems) throws InterruptedException {
    runs++;
    stack.generationWorker().delay(delay);
    EnvoyChild envoy = stack.envoy(setup);
    ExtProcChild extProc = stack.extProc(setup);
    long flowNanos = delay.toNanos() * bodies.events.size();
    Duration settle = delay.isZero() ? warmup : warmup.plusNanos(flowNanos);
    FlowRecorder recorder = new FlowRecorder(setup == Setup.SERVICE);
    long rssBefore = extProc == null ? 0 : ProcessMeter.rssBytes(extProc.pid());
    Map<String, Long> failuresBefore = envoy.extProcFailures();
    long t0 = System.nanoTime();
    long start = t0 + settle.toNanos();
    long end = start + window.toNanos();
    recorder.window(start, end);
    AtomicBoolean running = new AtomicBoolean(true);
    List<FlowLane> lanes = new ArrayList<>();
    for (int i = 0; i < concurrency; i++) {
      EventLoop loop = clientLoops.next();
      FlowLane lane = new FlowLane(loop, envoy.contextPort(), envoy.generationPort(),
          setup.key + "-" + runs + "-" + i + "-", bodies, recorder, running::get);
      lanes.add(lane);
      loop.schedule(lane::start, flowNanos * i / concurrency, TimeUnit.NANOSECONDS);
    }
    sleepUntil(start);
    long[] cpu0 = cpu(envoy, extProc);
    sleepUntil(end);
    long[] cpu1 = cpu(envoy, extProc);
    long rssAtEnd = extProc == null ? 0 : ProcessMeter.rssBytes(extProc.pid());
    running.set(false);
    CompletableFuture<?> stopped = CompletableFuture.allOf(lanes.stream().map(FlowLane::done).toArray(CompletableFuture[]::new));
    try {
      stopped.get(flowNanos + TimeUnit.SECONDS.toNanos(30), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      recorder.problem("flows still open 30 s after the window");
    } catch (java.util.concurrent.ExecutionException e) {
      recorder.problem("a lane failed: " + e.getCause());
    }
    envoy.extProcFailures().forEach(
        (counter, n) -> recorder.problem("Envoy's ext_proc " + counter, n - failuresBefore.getOrDefault(counter, 0L)));
    problems.accept(recorder.problems());
    long flows = recorder.flowsInWindow.get();
    double perFlow = Math.max(1, flows);
    return new RunStats(
        flows / (window.toNanos() / 1e9),
        recorder.ttft.percentile(0.50), recorder.ttft.percentile(0.99),
        recorder.gap.percentile(0.50), recorder.gap.percentile(0.99),
        (cpu1[0] - cpu0[0]) / perFlow, (cpu1[1] - cpu0[1]) / perFlow, (cpu1[2] - cpu0[2]) / perFlow,
        rssBefore, rssAtEnd, recorder.checked.get(), recorder.asExpected.get(), recorder.problemCount(),
        recorder.timeline((int) (window.toMillis() / 1000)));
  }

  /** CPU used so far by Envoy, the ext_proc process (0 without one) and this JVM (client and workers). */
  private static long[] cpu(EnvoyChild envoy, ExtProcChild extProc) {
    return new long[] {
      ProcessMeter.cpuNanos(envoy.pid()),
      extProc == null ? 0 : ProcessMeter.cpuNanos(extProc.pid()),
      ProcessMeter.cpuNanos(ProcessHandle.current().pid())
    };
  }

  private static void sleepUntil(long nanos) throws InterruptedException {
    long left;
    while ((left = nanos - System.nanoTime()) > 0) {
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }
}
