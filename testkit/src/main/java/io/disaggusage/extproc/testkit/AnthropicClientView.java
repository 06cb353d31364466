package io.disaggusage.extproc.testkit;

import com.anthropic.core.ObjectMappers;
import com.anthropic.helpers.MessageAccumulator;
import com.anthropic.models.messages.Message;
import com.anthropic.models.messages.RawMessageStreamEvent;
import com.anthropic.models.messages.Usage;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Reads client-visible Anthropic Messages bodies the way a real client does: with the official
 * Anthropic Java SDK's own models and mapper, a stream through the SDK's {@link MessageAccumulator}
 * (what {@code client.messages().createStreaming()} users accumulate with). A body or event the SDK
 * cannot read fails the test.
 */
public final class AnthropicClientView {
  private static final JsonMapper MAPPER = ObjectMappers.jsonMapper();

  /** The usage a client sees; a cache count is null when the response leaves it out. */
  public record MessagesUsage(long input, Long cacheRead, Long cacheCreation, long output) {
    /** The whole prompt by Anthropic's arithmetic. */
    long prompt() {
      return input + (cacheRead == null ? 0 : cacheRead) + (cacheCreation == null ? 0 : cacheCreation);
    }
  }

  private AnthropicClientView() {}

  public static MessagesUsage message(String json) throws Exception {
    Message m = MAPPER.readValue(json, Message.class);
    m.validate();
    return of(m.usage());
  }

  /**
   * Every event parsed as an SDK stream event and validated, then accumulated into one message as the
   * SDK's streaming client does. vLLM's {@code message_start} leaves {@code type} and {@code role} out
   * of its nested message (pydantic {@code exclude_unset}), which the SDK's opt-in strict validation
   * ({@code responseValidation}, off by default) refuses; of that event the usage is validated.
   */
  public static MessagesUsage stream(String sse) throws Exception {
    MessageAccumulator accumulator = MessageAccumulator.create();
    for (String[] named : namedEvents(sse)) {
      // The SDK's stream handler dispatches on the event name: ping is skipped, error thrown.
      if (named[0].equals("ping")) {
        continue;
      }
      if (!MESSAGE_EVENTS.contains(named[0])) {
        throw new AssertionError("event the SDK does not read: " + named[0]);
      }
      RawMessageStreamEvent event = MAPPER.readValue(named[1], RawMessageStreamEvent.class);
      if (event.messageStart().isPresent()) {
        event.messageStart().get().message().usage().validate();
      } else {
        event.validate();
      }
      accumulator.accumulate(event);
    }
    return of(accumulator.message().usage());
  }

  private static final Set<String> MESSAGE_EVENTS =
      Set.of("message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta",
          "content_block_stop");

  /** {@code [event name, data]} of each event, split on blank lines independently of the service's framer. */
  public static List<String[]> namedEvents(String sse) {
    List<String[]> out = new ArrayList<>();
    for (String event : sse.replace("\r\n", "\n").replace('\r', '\n').split("\n\n")) {
      String name = "message";
      String data = null;
      for (String line : event.split("\n")) {
        if (line.startsWith("event:")) {
          name = line.substring(6).strip();
        } else if (line.startsWith("data:")) {
          String v = line.substring(5).startsWith(" ") ? line.substring(6) : line.substring(5);
          data = data == null ? v : data + "\n" + v;
        }
      }
      if (data != null) {
        out.add(new String[] {name, data});
      }
    }
    return out;
  }

  private static MessagesUsage of(Usage u) {
    return new MessagesUsage(
        u.inputTokens(), u.cacheReadInputTokens().orElse(null), u.cacheCreationInputTokens().orElse(null), u.outputTokens());
  }
}
