package io.disaggusage.extproc.driver;

/** Which way a leg's headers and body travel: from the client upstream, or back to the client. */
public enum Direction {
  REQUEST,
  RESPONSE
}
