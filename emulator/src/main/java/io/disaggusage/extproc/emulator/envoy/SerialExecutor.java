package io.disaggusage.extproc.emulator.envoy;

import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;

/**
 * Runs tasks one at a time, in submission order, on a shared pool: the per-exchange "worker
 * thread" of the fake Envoy. Every state change of one exchange happens on it, so gRPC callback
 * threads only enqueue and never block.
 */
final class SerialExecutor implements Executor {
  private final Executor pool;
  private final Queue<Runnable> tasks = new ArrayDeque<>();
  private boolean running;

  SerialExecutor(Executor pool) {
    this.pool = pool;
  }

  @Override
  public void execute(Runnable task) {
    synchronized (this) {
      tasks.add(task);
      if (running) {
        return;
      }
      running = true;
    }
    try {
      pool.execute(this::drain);
    } catch (RejectedExecutionException e) {
      // The FakeEnvoy is closed: a late gRPC callback (the close of a stream it reset) has nothing left to do.
      synchronized (this) {
        tasks.clear();
        running = false;
      }
    }
  }

  private void drain() {
    while (true) {
      Runnable next;
      synchronized (this) {
        next = tasks.poll();
        if (next == null) {
          running = false;
          return;
        }
      }
      next.run();
    }
  }
}
