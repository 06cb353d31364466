package io.disaggusage.extproc.tools.replay;

import java.nio.file.Path;

/** A replay input file that is missing, unreadable or malformed; the message names the file. */
public final class ReplayInputException extends Exception {
  public ReplayInputException(Path file, String problem) {
    super(file + ": " + problem);
  }

  public ReplayInputException(Path file, String problem, Throwable cause) {
    super(file + ": " + problem, cause);
  }
}
