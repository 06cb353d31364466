package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The clients of the llm-d test, sending the headers llm-d's EPP would add: curl ({@code -s} JSON,
 * {@code -N} SSE) and the OpenAI Python SDK ({@code sdk_client.py}).
 */
final class LlmdClients {
  /** The header by which llm-d's EPP names the prefill pod ({@code PrefillEndpointHeader}). */
  static final String PREFILLER = "x-prefiller-host-port";

  /** What curl got back: the HTTP status and the body. */
  record Reply(int status, String body) {}

  private LlmdClients() {}

  /** A POST of {@code body} to pd-sidecar's chat completions with {@code headers}; any status. */
  static Reply curl(LlmdDeployment deployment, String body, boolean stream, Map<String, String> headers) {
    return curl(deployment.url("/v1/chat/completions"), body, stream, headers);
  }

  /** A POST of {@code body} to {@code url} with {@code headers}; any status. */
  static Reply curl(String url, String body, boolean stream, Map<String, String> headers) {
    List<String> command = new ArrayList<>(List.of(Tools.curl().toString(), "-sS"));
    if (stream) {
      command.add("-N");
    }
    command.addAll(List.of(url, "-H", "content-type: application/json"));
    headers.forEach((name, value) -> command.addAll(List.of("-H", name + ": " + value)));
    command.addAll(List.of("-d", body, "-w", "\n%{http_code}"));
    String out = RouterClients.run(command);
    int cut = out.lastIndexOf('\n');
    return new Reply(Integer.parseInt(out.substring(cut + 1).trim()), out.substring(0, cut));
  }

  /** The usage the OpenAI Python SDK parsed from a chat call with {@code message} and {@code headers}. */
  static JsonNode sdkChatUsage(LlmdDeployment deployment, String message, boolean stream, Map<String, String> headers) {
    String script = Tools.root().resolve("e2e/src/test/resources/clients/sdk_client.py").toString();
    return RouterClients.parseJson(RouterClients.run(List.of(Tools.pythonClients().toString(), script, deployment.url(""), "chat",
        Boolean.toString(stream), message, RouterClients.JSON.valueToTree(headers).toString())).trim());
  }
}
