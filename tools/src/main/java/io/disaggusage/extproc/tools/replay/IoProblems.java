package io.disaggusage.extproc.tools.replay;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.NoSuchFileException;

/** Short operator-facing words for why a file could not be read. */
final class IoProblems {
  private IoProblems() {}

  static String describe(IOException e) {
    if (e instanceof NoSuchFileException) {
      return "no such file";
    }
    if (e instanceof AccessDeniedException) {
      return "permission denied";
    }
    if (e instanceof java.nio.charset.CharacterCodingException) {
      return "not UTF-8 text";
    }
    return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
  }
}
