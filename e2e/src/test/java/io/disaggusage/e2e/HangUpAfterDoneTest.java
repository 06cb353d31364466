package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client that hangs up as soon as it has read {@code data: [DONE]}, as sglang-router does on its
 * decode connection: Envoy forwards the chunked terminator only after the service answered the end of
 * stream, so the client's close usually reaches Envoy first, and Envoy resets the ext_proc stream.
 * Every such exchange must still be accounted: the access log carries the corrected usage and the
 * service counts the exchange as rewritten, never as reset.
 *
 * <p>Whether the close wins depends on timing (on a fast, idle host it often does not), so the last
 * {@code LINGERING} flows make it certain: their decode worker ends its response {@code LINGER} after
 * {@code [DONE]}, as a worker that flushes {@code [DONE]} and tears down a moment later does.
 */
class HangUpAfterDoneTest {
  private static final int NATURAL = 15;
  private static final int LINGERING = 5;
  private static final int FLOWS = NATURAL + LINGERING;
  private static final Duration LINGER = Duration.ofMillis(300);
  private static final byte[] DONE = "data: [DONE]".getBytes(StandardCharsets.UTF_8);

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void everyExchangeIsAccountedWhenTheClientClosesAfterDone(String release) {
    try (Stack stack = Stack.start("hangup-" + release, release, 1)) {
      VllmFlow flow = new VllmFlow(3, Duration.ofMillis(2)).install(stack);
      for (int i = 0; i < 3; i++) {
        flow.run(stack, "warm-" + i); // the first exchanges after a start are not what this test is about
      }
      long rewrittenBefore = stack.service().exchanges("generation", "rewritten");
      int linesBefore = generationLines(stack).size();
      String corrected = new String(flow.corrected, StandardCharsets.UTF_8);
      long resetsBefore = downstreamResets(stack);

      for (int i = 0; i < FLOWS; i++) {
        if (i == NATURAL) {
          stack.generation.answer(request -> flow.decodeReply().lingering(LINGER));
        }
        String id = "hangup-" + release + "-" + i;
        assertThat(VllmFlow.prefill(stack, id).status()).isEqualTo(200);
        String read = readUntilDoneAndClose(stack.envoy.generationUrl("/v1/chat/completions"), id);
        assertThat(corrected).as("what the client read before hanging up").startsWith(read);
        assertThat(read).endsWith("data: [DONE]");
      }

      Processes.await("an access-log line per exchange", Duration.ofSeconds(5),
          () -> generationLines(stack).size() >= linesBefore + FLOWS);
      List<AccessLogLine> lines = generationLines(stack).subList(linesBefore, linesBefore + FLOWS);
      for (AccessLogLine line : lines) {
        assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("rewritten");
        assertThat(line.field("cached_tokens")).isEqualTo(Integer.toString(VllmWorkers.CACHED));
        assertThat(line.field("reported_cached_tokens")).isEqualTo(Integer.toString(VllmWorkers.PROMPT));
      }
      Processes.await("every exchange counted", Duration.ofSeconds(5),
          () -> stack.service().exchanges("generation", "rewritten") - rewrittenBefore == FLOWS);
      assertThat(stack.service().exchanges("generation", "reset")).isZero();
      long resets = downstreamResets(stack) - resetsBefore;
      System.out.printf("Envoy %s: %d clients closed after [DONE] (%d of them with the worker ending %d ms later),"
          + " %d of them before Envoy's end of stream (downstream resets); all accounted%n",
          release, FLOWS, LINGERING, LINGER.toMillis(), resets);
      assertThat(resets).as("the race this test is about happened, at least for the lingering worker's flows")
          .isGreaterThanOrEqualTo(LINGERING);
    }
  }

  /** Requests on the generation listener that the client reset before their end. */
  private static long downstreamResets(Stack stack) {
    return stack.envoy.stats("http.generation_egress.downstream_rq_rx_reset").values().stream().mapToLong(Long::longValue).sum();
  }

  private static List<AccessLogLine> generationLines(Stack stack) {
    return stack.envoy.accessLog().stream().filter(l -> l.cluster().equals("generation")).toList();
  }

  /** Sends the decode request over HTTP/1.1, reads the body until {@code data: [DONE]}, and closes. */
  private static String readUntilDoneAndClose(String url, String requestId) {
    URI uri = URI.create(url);
    byte[] body = VllmFlow.DECODE_REQUEST.getBytes(StandardCharsets.UTF_8);
    String head = "POST " + uri.getPath() + " HTTP/1.1\r\nHost: " + uri.getHost() + ":" + uri.getPort()
        + "\r\ncontent-type: application/json\r\nx-request-id: " + requestId + "\r\ncontent-length: " + body.length + "\r\n\r\n";
    try (Socket socket = new Socket(uri.getHost(), uri.getPort())) {
      socket.setSoTimeout(10_000);
      OutputStream out = socket.getOutputStream();
      out.write(head.getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
      ChunkedBody response = new ChunkedBody(socket.getInputStream());
      while (!response.contains(DONE)) {
        response.readMore();
      }
      return response.text();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A chunked HTTP/1.1 response read piecemeal: the body decoded so far, up to the bytes read. */
  private static final class ChunkedBody {
    private final InputStream in;
    private final ByteArrayOutputStream raw = new ByteArrayOutputStream();
    private final byte[] buffer = new byte[8192];

    ChunkedBody(InputStream in) {
      this.in = in;
    }

    void readMore() throws IOException {
      int n = in.read(buffer);
      if (n < 0) {
        throw new AssertionError("the response ended before data: [DONE]: " + text());
      }
      raw.write(buffer, 0, n);
    }

    boolean contains(byte[] needle) {
      return text().contains(new String(needle, StandardCharsets.UTF_8));
    }

    /** The body decoded from the chunks received so far (a partial last chunk included). */
    String text() {
      String all = raw.toString(StandardCharsets.ISO_8859_1);
      int start = all.indexOf("\r\n\r\n");
      if (start < 0) {
        return "";
      }
      StringBuilder body = new StringBuilder();
      int at = start + 4;
      while (at < all.length()) {
        int eol = all.indexOf("\r\n", at);
        if (eol < 0) {
          break;
        }
        int size = Integer.parseInt(all.substring(at, eol).trim(), 16);
        int from = eol + 2;
        body.append(all, from, Math.min(all.length(), from + size));
        at = from + size + 2;
      }
      return new String(body.toString().getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8).trim();
    }
  }
}
