package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.rewrite.Bytes;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;

/**
 * An exchange whose response body is not read: before the response headers, when the exchange is not
 * one the service corrects, and after an internal error. A chunk that comes all the same is forwarded
 * as it came, after any bytes an earlier failure gives back.
 */
final class PassThroughLeg implements Leg {
  private final ReplyQueue replies;
  private final ExchangeRecord record;

  PassThroughLeg(ReplyQueue replies, ExchangeRecord record) {
    this.replies = replies;
    this.record = record;
  }

  @Override
  public void onBody(HttpBody chunk, ReplyQueue.Slot slot) {
    replies.forward(slot, chunk.getBody());
  }

  @Override
  public byte[] abandon() {
    return Bytes.EMPTY;
  }

  @Override
  public void streamEnded(Phase uncounted) {
    if (uncounted != null) {
      record.report(uncounted, Outcome.RESET);
    }
  }
}
