package io.disaggusage.bench.envoy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The access log one of the bench's Envoys writes (the shipped stdout access log, Envoy's stdout appended to
 * a file), read run by run: only the bytes appended since the last read, line by line, then the file is
 * emptied, so it never holds more than one run (Envoy's stdout is opened for appending, so its next line
 * goes to the new end).
 */
final class AccessLogTail {
  /** How often the bench's Envoys flush their access log ({@code --file-flush-interval-msec}). */
  static final Duration FLUSH_INTERVAL = Duration.ofMillis(250);
  private static final int CHUNK = 1 << 20;
  private final Path file;

  AccessLogTail(Path file) {
    this.file = file;
  }

  Path file() {
    return file;
  }

  /**
   * Passes every whole line appended since the last read to {@code lines} until {@code enough} says so or
   * {@code timeout} has passed (Envoy flushes every {@link #FLUSH_INTERVAL}), then empties the file.
   *
   * @return whether {@code enough} was met
   */
  boolean drain(Consumer<CharSequence> lines, BooleanSupplier enough, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    long offset = 0;
    StringBuilder line = new StringBuilder(512);
    ByteBuffer buffer = ByteBuffer.allocate(CHUNK);
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      while (true) {
        int n;
        while ((n = channel.read(buffer.clear(), offset)) > 0) {
          offset += n;
          for (int i = 0; i < n; i++) {
            byte b = buffer.get(i);
            if (b == '\n') {
              lines.accept(line);
              line.setLength(0);
            } else {
              line.append((char) (b & 0xff)); // the format is ASCII
            }
          }
        }
        boolean met = enough.getAsBoolean();
        if (met || System.nanoTime() >= deadline) {
          channel.truncate(0);
          return met;
        }
        TimeUnit.MILLISECONDS.sleep(50);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
