package io.disaggusage.extproc.inject;

import io.disaggusage.extproc.inject.IncludeUsageInjector.LegProbe;
import io.disaggusage.extproc.driver.Chunking;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** One request body through an {@link IncludeUsageInjector}: what left, and how it ended. */
record InjectorRun(String output, InjectionOutcome outcome, boolean injected, List<byte[]> replies) {

  static final int MAX_HELD = 1 << 20;

  static final LegProbe LEG = () -> true;
  static final LegProbe OTHER = () -> false;

  static InjectorRun of(String body, LegProbe probe, Chunking chunking) {
    return of(body.getBytes(StandardCharsets.UTF_8), probe, chunking, MAX_HELD);
  }

  static InjectorRun of(byte[] body, LegProbe probe, Chunking chunking, int maxHeld) {
    IncludeUsageInjector injector = new IncludeUsageInjector(maxHeld);
    List<byte[]> chunks = new ArrayList<>(chunking.split(body));
    if (chunks.isEmpty()) {
      chunks.add(new byte[0]);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    List<byte[]> replies = new ArrayList<>();
    for (int i = 0; i < chunks.size(); i++) {
      byte[] reply = injector.accept(chunks.get(i), i == chunks.size() - 1, probe);
      replies.add(reply);
      out.writeBytes(reply);
    }
    return new InjectorRun(out.toString(StandardCharsets.UTF_8), injector.outcome(), injector.injected(), replies);
  }
}
