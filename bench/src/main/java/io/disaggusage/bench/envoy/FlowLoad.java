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
import java.util.function.Consumer;

/**
 * One measured run: {@code concurrency} closed-loop {@link FlowLane}s through one setup's Envoy. The
 * lanes start together without an inter-token delay; with one they start spread over a flow's duration,
 * so the streams stay out of step. After the warm-up (with a delay, at least one whole flow, so every
 * lane is streaming) comes the measurement window, during which CPU time is read from {@code /proc} at
 * both ends; then the lanes finish their flows and stop, and Envoy's access-log lines of the run are read.
 * The window can be asked to stretch until it holds enough TTFT samples: it is then extended, always
 * before it ends, so a sample is never judged against a window end that moves behind it.
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

  /** How long before the window's end it decides whether to extend it (at most a quarter of the window). */
  private static final long EXTEND_LEAD_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
  /** How long to wait for Envoy's access-log lines of a run once its flows are done. */
  private static final Duration ACCESS_LOG_WAIT = AccessLogTail.FLUSH_INTERVAL.multipliedBy(20);

  /** Runs {@code setup} with a window of {@code window} exactly; problems (never bodies) go to {@code problems}. */
  RunStats run(Setup setup, int concurrency, Duration delay, Duration warmup, Duration window,
      Consumer<Map<String, Long>> problems) throws InterruptedException {
    return run(setup, concurrency, delay, warmup, window, 0, window, problems);
  }

  /**
   * Runs {@code setup}; the window lasts {@code window}, longer when it has fewer than {@code minSamples} TTFT
   * samples by then, until it has them or lasts {@code maxWindow}. Problems (never bodies) go to {@code problems}.
   */
  RunStats run(Setup setup, int concurrency, Duration delay, Duration warmup, Duration window, int minSamples,
      Duration maxWindow, Consumer<Map<String, Long>> problems) throws InterruptedException {
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
    long wallOffset = System.currentTimeMillis() * 1_000_000L - t0; // nanoTime to epoch nanoseconds
    long start = t0 + settle.toNanos();
    long end = start + window.toNanos();
    long cap = start + Math.max(window.toNanos(), maxWindow.toNanos());
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
    while (minSamples > 0 && end < cap) {
      long lead = Math.min(EXTEND_LEAD_NANOS, (end - start) / 4);
      sleepUntil(end - lead);
      long samples = recorder.ttft.count();
      if (samples >= minSamples) {
        break;
      }
      // at the rate so far, plus the lead; at least one lead further, so the loop looks again before the end
      long elapsed = System.nanoTime() - start;
      long projected = samples == 0 ? end - start + window.toNanos() : (long) (elapsed * (double) minSamples / samples);
      end = Math.min(cap, Math.max(start + projected + lead, end + lead));
      recorder.window(start, end);
    }
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
    ExtProcWaits waits = new ExtProcWaits((start + wallOffset) / 1_000_000L, (end + wallOffset) / 1_000_000L);
    long responses = recorder.checked.get();
    if (!envoy.accessLog().drain(waits::accept, () -> waits.generationLines() >= responses, ACCESS_LOG_WAIT)) {
      recorder.problem("fewer generation lines in Envoy's access log than generation responses");
    }
    envoy.extProcFailures().forEach(
        (counter, n) -> recorder.problem("Envoy's ext_proc " + counter, n - failuresBefore.getOrDefault(counter, 0L)));
    problems.accept(recorder.problems());
    long flows = recorder.flowsInWindow.get();
    double perFlow = Math.max(1, flows);
    double seconds = (end - start) / 1e9;
    return new RunStats(
        flows / seconds, recorder.ttft, recorder.gap,
        (cpu1[0] - cpu0[0]) / perFlow, (cpu1[1] - cpu0[1]) / perFlow, (cpu1[2] - cpu0[2]) / perFlow,
        rssBefore, rssAtEnd, recorder.checked.get(), recorder.asExpected.get(), recorder.problemCount(),
        recorder.timeline((int) seconds), seconds, waits);
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
