package io.disaggusage.extproc.edgeguard;

import io.disaggusage.extproc.edge.MemberRemoval;
import io.disaggusage.extproc.edge.MemberRemover;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;

/**
 * Start-up warm-up of the edge guard's body path. Its filter fails closed, so a reply later than Envoy's
 * message timeout is a client's 504: a cold JVM read its first 2.5 MB body in 220 ms (the parser and the
 * remover interpreted), a warm one in 11-15 ms. Before the guard serves, bodies with every removed
 * path are read in rounds, in small and large chunks, until the time is up. (The gRPC path is warmed by
 * the service's own warm-up, which runs in both roles.)
 */
final class EdgeGuardWarmup {
  /** Rounds after which the remover is compiled (measured: the fifth 2.5 MB round ran at warm speed). */
  static final int MAX_ROUNDS = 40;

  private EdgeGuardWarmup() {}

  /** Reads synthetic bodies through {@code removal} for at most {@code budget}; returns the rounds run. */
  static int run(MemberRemoval removal, Duration budget) {
    byte[] body = body(removal);
    long deadline = System.nanoTime() + budget.toNanos();
    int rounds = 0;
    while (rounds < MAX_ROUNDS && System.nanoTime() < deadline) {
      read(removal, body, rounds % 2 == 0 ? 1024 : 65_536);
      rounds++;
    }
    return rounds;
  }

  private static void read(MemberRemoval removal, byte[] body, int chunk) {
    MemberRemover remover = removal.start();
    for (int from = 0; from < body.length; from += chunk) {
      int to = Math.min(body.length, from + chunk);
      remover.accept(Arrays.copyOfRange(body, from, to), to == body.length);
    }
    if (!remover.complete()) {
      throw new IllegalStateException("the warm-up body was refused: " + remover.rejection());
    }
  }

  /** About 256 KiB of a chat request with each removed path in it, escapes, numbers and NaN. */
  static byte[] body(MemberRemoval removal) {
    StringBuilder json = new StringBuilder("{\"model\":\"warmup\",\"temperature\":NaN,\"messages\":[");
    for (int i = 0; i < 2_000; i++) {
      json.append(i == 0 ? "" : ", ")
          .append("{\"role\":\"user\",\"content\":\"line ")
          .append(i)
          .append(" \\u00e9\\n\",\"n\":[1.5e3,-2,true,null]}");
    }
    json.append(']');
    for (String path : removal.paths().paths()) {
      String[] names = path.split("\\.");
      json.append(",\n  ");
      for (String name : names) {
        json.append('"').append(name).append("\":{");
      }
      json.append("\"x\":1").append("}".repeat(names.length));
    }
    return json.append('}').toString().getBytes(StandardCharsets.UTF_8);
  }
}
