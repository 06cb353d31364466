package io.disaggusage.extproc.driver;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * How a body is cut into the data callbacks Envoy's codec delivers. Each chunk becomes one
 * {@code HttpBody} message in STREAMED mode. Chunk boundaries are arbitrary bytes, never aligned to
 * SSE events.
 */
@FunctionalInterface
public interface Chunking {

  /** Splits a body into chunks; concatenating them must give the body back. */
  List<byte[]> split(byte[] body);

  /** The whole body in one data callback (no chunk at all for an empty body). */
  static Chunking whole() {
    return body -> body.length == 0 ? List.of() : List.of(body.clone());
  }

  /** Chunks of {@code size} bytes (the last one may be shorter). */
  static Chunking fixed(int size) {
    if (size <= 0) {
      throw new IllegalArgumentException("chunk size must be positive: " + size);
    }
    return body -> {
      List<byte[]> out = new ArrayList<>();
      for (int i = 0; i < body.length; i += size) {
        out.add(Arrays.copyOfRange(body, i, Math.min(body.length, i + size)));
      }
      return out;
    };
  }

  /**
   * {@code parts} chunks of near-equal size, chunk {@code i} from byte {@code length * i / parts} (a body
   * shorter than {@code parts} bytes gives empty chunks too).
   */
  static Chunking parts(int parts) {
    if (parts <= 0) {
      throw new IllegalArgumentException("parts must be positive: " + parts);
    }
    return body -> {
      List<byte[]> out = new ArrayList<>(parts);
      for (int i = 0; i < parts; i++) {
        out.add(Arrays.copyOfRange(body, body.length * i / parts, body.length * (i + 1) / parts));
      }
      return out;
    };
  }

  /** One chunk per byte. */
  static Chunking bytewise() {
    return fixed(1);
  }

  /**
   * One chunk per server-sent event, cut after the blank line that ends it ({@code \n}, {@code \r\n}
   * or {@code \r} line ends): how an engine that writes each event as it is produced reaches Envoy.
   * Bytes after the last complete event form a last chunk.
   */
  static Chunking sseEvents() {
    return body -> {
      List<byte[]> out = new ArrayList<>();
      int start = 0;
      int lineStart = 0;
      boolean fields = false;
      int i = 0;
      while (i < body.length) {
        if (body[i] != '\n' && body[i] != '\r') {
          i++;
          continue;
        }
        int next = body[i] == '\r' && i + 1 < body.length && body[i + 1] == '\n' ? i + 2 : i + 1;
        if (i > lineStart) {
          fields = true;
        } else if (fields) {
          out.add(Arrays.copyOfRange(body, start, next));
          start = next;
          fields = false;
        }
        i = next;
        lineStart = next;
      }
      if (start < body.length) {
        out.add(Arrays.copyOfRange(body, start, body.length));
      }
      return out;
    };
  }

  /**
   * Splits at the given offsets (strictly increasing, each in {@code (0, body.length)}); offsets
   * outside the body are ignored.
   */
  static Chunking at(int... offsets) {
    int[] points = offsets.clone();
    return body -> {
      List<byte[]> out = new ArrayList<>();
      int start = 0;
      for (int p : points) {
        if (p <= start || p >= body.length) {
          continue;
        }
        out.add(Arrays.copyOfRange(body, start, p));
        start = p;
      }
      if (start < body.length) {
        out.add(Arrays.copyOfRange(body, start, body.length));
      }
      return out;
    };
  }

  /** Random chunk sizes in {@code [1, maxChunk]}, reproducible from the seed. */
  static Chunking random(long seed, int maxChunk) {
    if (maxChunk <= 0) {
      throw new IllegalArgumentException("maxChunk must be positive: " + maxChunk);
    }
    return body -> {
      Random rnd = new Random(seed);
      List<byte[]> out = new ArrayList<>();
      int i = 0;
      while (i < body.length) {
        int n = 1 + rnd.nextInt(maxChunk);
        out.add(Arrays.copyOfRange(body, i, Math.min(body.length, i + n)));
        i += n;
      }
      return out;
    };
  }

  /**
   * The same split followed by an extra empty chunk, which then carries {@code end_of_stream}
   * (typical for HTTP/1 chunked upstreams and HTTP/2 empty END_STREAM frames).
   */
  default Chunking withEmptyFinalChunk() {
    Chunking base = this;
    return body -> {
      List<byte[]> out = new ArrayList<>(base.split(body));
      out.add(new byte[0]);
      return out;
    };
  }
}
