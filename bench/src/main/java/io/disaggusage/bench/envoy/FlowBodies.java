package io.disaggusage.bench.envoy;

import io.disaggusage.bench.Bodies;
import io.disaggusage.bench.e2e.EndToEnd;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The bytes of one vLLM P/D flow: the prefill (context) request and its JSON answer, the decode
 * (generation) request and its SSE stream of content events, usage event and {@code [DONE]}.
 *
 * <p>The decode worker reports a prompt one token longer than the prefill worker's and all of it as
 * cached (the KV it received), so a corrected stream is told apart from an untouched one by both the
 * prompt and the cached count: the service must put the context's 1013 prompt and 7 cached tokens in
 * place of the worker's 1014 and 1014, keep the completion count and recompute the total.
 */
final class FlowBodies {
  static final String PATH = EndToEnd.PATH;
  static final byte[] CONTEXT_REQUEST = utf8(EndToEnd.CONTEXT_REQUEST);
  static final byte[] GENERATION_REQUEST = utf8(EndToEnd.GENERATION_REQUEST);
  /** The prefill worker's answer: 1013 prompt tokens, 7 of them cached, one forced token. */
  static final byte[] CONTEXT_RESPONSE = utf8(Wire.chatCompletion("ctx", Bodies.CONTEXT_USAGE));

  /** Each content event on its own, as the worker writes them. */
  final List<byte[]> events;
  /** The worker's usage event: its own (wrong) prompt and cached counts. */
  final byte[] usageEvent;
  /** What the client must read after the last content event: untouched ((a), (b)) or corrected ((c)). */
  final byte[] untouchedTail;
  final byte[] correctedTail;
  /** The whole generation body's length, untouched and corrected. */
  final long untouchedLength;
  final long correctedLength;

  FlowBodies(int contentEvents) {
    this.events = Bodies.contentEventList(contentEvents, 11).stream().map(FlowBodies::utf8).toList();
    String workerUsage = Wire.usageChunk(Wire.usage(1014, contentEvents, 1014L));
    this.usageEvent = utf8(workerUsage);
    this.untouchedTail = utf8(workerUsage + Wire.DONE);
    this.correctedTail = utf8(Wire.usageChunk(Wire.usage(1013, contentEvents, 7L)) + Wire.DONE);
    long content = events.stream().mapToLong(e -> e.length).sum();
    this.untouchedLength = content + untouchedTail.length;
    this.correctedLength = content + correctedTail.length;
  }

  static byte[] done() {
    return utf8(Wire.DONE);
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
