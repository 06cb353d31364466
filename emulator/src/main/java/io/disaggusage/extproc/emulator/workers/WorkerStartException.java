package io.disaggusage.extproc.emulator.workers;

/** A simulated worker could not start (its address is taken or not local). The message is for the operator. */
public final class WorkerStartException extends Exception {
  private static final long serialVersionUID = 1L;

  public WorkerStartException(String message, Throwable cause) {
    super(message, cause);
  }
}
