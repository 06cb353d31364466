package io.disaggusage.extproc.testing;

import java.nio.charset.StandardCharsets;

/** Test text as the bytes Envoy carries, and back: every body on the wire is UTF-8. */
public final class Text {
  private Text() {}

  public static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  public static String text(byte[] utf8) {
    return new String(utf8, StandardCharsets.UTF_8);
  }
}
