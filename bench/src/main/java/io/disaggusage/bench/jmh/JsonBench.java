package io.disaggusage.bench.jmh;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.bench.Bodies;
import io.disaggusage.bench.Fixtures;
import io.disaggusage.extproc.rewrite.ProcessorFactory;
import java.io.IOException;
import java.util.List;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * A non-streaming generation response (chat completion with logprobs, usage at the end): the
 * service's rewrite against a Jackson tree round trip and against tokenizing alone (the parse floor).
 * The service is fed 16 KiB chunks, as Envoy would stream them; the other two get the whole body.
 */
@State(Scope.Thread)
public class JsonBench {
  /** Body size in bytes. */
  @Param({"2048", "1048576"})
  public int size;

  ProcessorFactory factory;
  JsonFactory json;
  ObjectMapper mapper;
  byte[] body;
  List<byte[]> chunks;

  @Setup(Level.Trial)
  public void setUp() {
    factory = Fixtures.processors();
    json = Fixtures.json();
    mapper = new ObjectMapper(json);
    body = Bodies.chatCompletionWithLogprobs(size, 3);
    chunks = Bodies.chunks(body, 16 * 1024);
  }

  /** The service: {@code ProcessorFactory.generation(false, …)} over the chunks. */
  @Benchmark
  public long rewrite() {
    return Fixtures.generation(factory, false, chunks);
  }

  /** {@code readTree}, set the corrected usage figures, {@code writeValueAsBytes}. */
  @Benchmark
  public byte[] jacksonTree() throws IOException {
    ObjectNode root = (ObjectNode) mapper.readTree(body);
    ObjectNode usage = (ObjectNode) root.get("usage");
    long completion = usage.get("completion_tokens").asLong();
    usage.put("prompt_tokens", 1013);
    usage.put("total_tokens", 1013 + completion);
    ((ObjectNode) usage.get("prompt_tokens_details")).put("cached_tokens", 7);
    return mapper.writeValueAsBytes(root);
  }

  /** {@code JsonParser.nextToken()} over the body and nothing else. */
  @Benchmark
  public int tokenize() throws IOException {
    int tokens = 0;
    try (JsonParser p = json.createParser(body)) {
      while (p.nextToken() != null) {
        tokens++;
      }
    }
    return tokens;
  }
}
