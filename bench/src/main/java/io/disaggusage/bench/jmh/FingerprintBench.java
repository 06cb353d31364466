package io.disaggusage.bench.jmh;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.bench.Bodies;
import io.disaggusage.bench.Fixtures;
import io.disaggusage.extproc.classify.RequestBodyScanner;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * The request-body scan of a chat request, in 16 KiB chunks, with and without the prompt
 * fingerprint: the same bytes, except that the second body's {@code messages} is spelled {@code
 * massages}, so the scanner parses exactly as much and hashes nothing. Two shapes: {@code chat}, many
 * short messages (the per-member cost), and {@code long}, one long user message (the per-byte cost).
 */
@State(Scope.Thread)
public class FingerprintBench {
  /** Body size in bytes. */
  @Param({"1024", "65536", "1048576"})
  public int size;

  /** {@code chat}: many short messages; {@code long}: a system message and one long user message. */
  @Param({"chat", "long"})
  public String shape;

  JsonFactory json;
  List<byte[]> fingerprinted;
  List<byte[]> unhashed;

  @Setup(Level.Trial)
  public void setUp() {
    json = Fixtures.json();
    String body = shape.equals("long") ? longRequest(size) : chatRequest(size);
    fingerprinted = Bodies.chunks(body.getBytes(StandardCharsets.UTF_8), 16 * 1024);
    unhashed = Bodies.chunks(body.replace("\"messages\"", "\"massages\"").getBytes(StandardCharsets.UTF_8), 16 * 1024);
  }

  /** A chat request of about {@code size} bytes: many short messages, as a multi-turn conversation. */
  static String chatRequest(int size) {
    StringBuilder b = new StringBuilder("{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"messages\":[");
    int turn = 0;
    while (b.length() < size - 120) {
      b.append(turn == 0 ? "" : ",").append("{\"role\":\"").append(turn % 2 == 0 ? "user" : "assistant")
          .append("\",\"content\":\"turn ").append(turn).append(": the quick brown fox jumps over the lazy dog\"}");
      turn++;
    }
    return b.append("],\"max_tokens\":256,\"stream\":true,\"stream_options\":{\"include_usage\":true}}").toString();
  }

  /** A chat request of about {@code size} bytes: a system message and one user message filling the rest. */
  static String longRequest(int size) {
    StringBuilder b = new StringBuilder("{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"messages\":[")
        .append("{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},")
        .append("{\"role\":\"user\",\"content\":\"");
    int line = 0;
    while (b.length() < size - 120) {
      b.append("line ").append(line++).append(": the quick brown fox jumps over the lazy dog.\\n");
    }
    return b.append("\"}],\"max_tokens\":256,\"stream\":true,\"stream_options\":{\"include_usage\":true}}").toString();
  }

  @Benchmark
  public Object scanWithFingerprint() {
    return scan(fingerprinted);
  }

  @Benchmark
  public Object scanWithoutFingerprint() {
    return scan(unhashed);
  }

  private Object scan(List<byte[]> chunks) {
    RequestBodyScanner s = new RequestBodyScanner(json, 64 * 1024);
    for (byte[] c : chunks) {
      s.feed(ByteBuffer.wrap(c));
    }
    s.end();
    return s.facts();
  }
}
