package io.disaggusage.extproc.emulator.engines;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A POST from the orchestrator to a worker, as it leaves the orchestrator.
 *
 * @param headers lower-case names, in the order sent
 */
public record WorkerCall(String path, Map<String, String> headers, byte[] body) {
  public WorkerCall {
    headers = Collections.unmodifiableMap(new LinkedHashMap<>(headers));
    body = body.clone();
  }

  @Override
  public byte[] body() {
    return body.clone();
  }

  public String bodyUtf8() {
    return new String(body, StandardCharsets.UTF_8);
  }
}
