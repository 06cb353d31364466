package io.disaggusage.extproc.simulation.engines;

import io.disaggusage.extproc.simulation.engines.WordTokenizer.Message;
import java.util.List;

/**
 * A chat completion request as the client sends it to the orchestrator.
 *
 * @param stream whether the client streams (it then asks for the usage chunk)
 */
public record ClientRequest(String model, List<Message> messages, int maxTokens, boolean stream) {
  public ClientRequest {
    messages = List.copyOf(messages);
  }
}
