package io.disaggusage.bench.jmh;

import io.disaggusage.bench.Bodies;
import io.disaggusage.bench.Fixtures;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import io.disaggusage.extproc.testkit.Wire;
import java.util.ArrayList;
import java.util.List;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/** How the cost grows with the body: time per byte (JSON) and per chunk (SSE) at each size. */
public class GrowthBench {

  /** A JSON generation body of {@code kib} KiB in 16 KiB chunks. */
  @State(Scope.Thread)
  public static class Json {
    @Param({"16", "256", "4096", "16384"})
    public int kib;

    ProcessorFactory factory;
    List<byte[]> chunks;
    public int bytes;

    @Setup(Level.Trial)
    public void setUp() {
      factory = Fixtures.processors();
      byte[] body = Bodies.chatCompletionWithLogprobs(kib * 1024, 5);
      bytes = body.length;
      chunks = Bodies.chunks(body, 16 * 1024);
    }
  }

  /** An SSE stream of {@code chunks} chunks, one content event each, then the usage event and [DONE]. */
  @State(Scope.Thread)
  public static class Sse {
    @Param({"10", "1000", "100000"})
    public int chunks;

    ProcessorFactory factory;
    List<byte[]> body;

    @Setup(Level.Trial)
    public void setUp() {
      factory = Fixtures.processors();
      body = new ArrayList<>(chunks);
      byte[] stream = Bodies.chatStream(chunks - 2, 6);
      // one event per chunk: what a token-by-token stream looks like to Envoy
      int start = 0;
      for (int i = 0; i < stream.length - 1; i++) {
        if (stream[i] == '\n' && stream[i + 1] == '\n') {
          body.add(java.util.Arrays.copyOfRange(stream, start, i + 2));
          start = i + 2;
        }
      }
      if (body.size() != chunks || start != stream.length) {
        throw new IllegalStateException("expected " + chunks + " events, got " + body.size());
      }
      if (!new String(body.get(body.size() - 1), java.nio.charset.StandardCharsets.UTF_8).equals(Wire.DONE)) {
        throw new IllegalStateException("stream must end with [DONE]");
      }
    }
  }

  @Benchmark
  public long json(Json s) {
    return Fixtures.generation(s.factory, false, s.chunks);
  }

  @Benchmark
  public long sse(Sse s) {
    return Fixtures.generation(s.factory, true, s.body);
  }
}
