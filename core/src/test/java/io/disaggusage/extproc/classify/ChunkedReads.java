package io.disaggusage.extproc.classify;

import java.nio.ByteBuffer;
import java.util.function.UnaryOperator;

/** Feeds a request body to a {@link RequestBodyReader} cut at given points, as Envoy's chunks bring it. */
final class ChunkedReads {
  /** Each chunk a window on the body's array, as the service gets them from a gRPC message. */
  static final UnaryOperator<ByteBuffer> ARRAY_WINDOWS = UnaryOperator.identity();
  /** Each chunk a read-only buffer of its own: a reader that reached for the array would fail. */
  static final UnaryOperator<ByteBuffer> READ_ONLY = chunk -> chunk.slice().asReadOnlyBuffer();

  private ChunkedReads() {}

  /** What {@code reader} makes of {@code body} fed in chunks that end at {@code splits}, then ended. */
  static RequestFacts read(RequestBodyReader reader, byte[] body, UnaryOperator<ByteBuffer> chunks, int... splits) {
    int prev = 0;
    for (int split : splits) {
      reader.feed(chunks.apply(ByteBuffer.wrap(body, prev, split - prev)));
      prev = split;
    }
    reader.feed(chunks.apply(ByteBuffer.wrap(body, prev, body.length - prev)));
    reader.end();
    return reader.facts();
  }
}
