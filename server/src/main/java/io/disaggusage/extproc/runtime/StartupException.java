package io.disaggusage.extproc.runtime;

/** The server could not start (port in use, store unavailable). The message is meant for the operator. */
public final class StartupException extends Exception {
  private static final long serialVersionUID = 1L;

  public StartupException(String message) {
    super(message);
  }

  public StartupException(String message, Throwable cause) {
    super(message, cause);
  }
}
