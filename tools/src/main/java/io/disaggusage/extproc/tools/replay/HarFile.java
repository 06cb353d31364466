package io.disaggusage.extproc.tools.replay;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.emulator.envoy.HeaderList;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Locale;

/**
 * The two legs from a HAR file (as browsers, mitmproxy and most HTTP debugging proxies export them) or
 * from the same structure without the {@code log} wrapper. Per entry: {@code request.method},
 * {@code request.url} (absolute or a path), {@code request.headers}, {@code request.postData.text},
 * {@code response.status}, {@code response.headers}, {@code response.content.text}; a text may be
 * base64 with {@code "encoding": "base64"}. Two extensions (HAR allows custom fields starting with
 * {@code _}): {@code _leg} ({@code context} or {@code generation}) and {@code _cluster} (the Envoy
 * cluster). Without {@code _leg}, one entry is the generation leg and two are context, then generation.
 * See docs/demo-and-replay.md.
 */
public final class HarFile {
  private static final ObjectMapper JSON = new ObjectMapper();

  private HarFile() {}

  public static ReplayInput read(Path file) throws ReplayInputException {
    JsonNode root;
    try {
      root = JSON.readTree(Files.readAllBytes(file));
    } catch (JsonProcessingException e) {
      throw new ReplayInputException(file, "not JSON: " + e.getOriginalMessage(), e);
    } catch (IOException e) {
      throw new ReplayInputException(file, "cannot read: " + IoProblems.describe(e), e);
    }
    JsonNode entries = root == null ? null : root.has("log") ? root.path("log").path("entries") : root.path("entries");
    if (entries == null || !entries.isArray() || entries.isEmpty()) {
      throw new ReplayInputException(file, "expected {\"log\": {\"entries\": [...]}} or {\"entries\": [...]} with one or two entries");
    }
    ReplayLeg context = null;
    ReplayLeg generation = null;
    boolean marked = entries.get(0).has("_leg");
    if (!marked && entries.size() > 2) {
      throw new ReplayInputException(file, entries.size() + " entries: mark the two to replay with \"_leg\": \"context\" / \"generation\"");
    }
    for (int i = 0; i < entries.size(); i++) {
      JsonNode entry = entries.get(i);
      String where = "entries[" + i + "]";
      String leg = marked ? entry.path("_leg").asText("") : i == entries.size() - 1 ? "generation" : "context";
      switch (leg.toLowerCase(Locale.ROOT)) {
        case "context", "prefill" -> {
          if (context != null) {
            throw new ReplayInputException(file, where + ": a second context leg");
          }
          context = leg(file, where, entry);
        }
        case "generation", "decode" -> {
          if (generation != null) {
            throw new ReplayInputException(file, where + ": a second generation leg");
          }
          generation = leg(file, where, entry);
        }
        default -> throw new ReplayInputException(
            file, where + "._leg: expected \"context\" or \"generation\", got \"" + leg + "\"");
      }
    }
    if (generation == null) {
      throw new ReplayInputException(file, "no generation leg");
    }
    return new ReplayInput(context, generation);
  }

  private static ReplayLeg leg(Path file, String where, JsonNode entry) throws ReplayInputException {
    JsonNode request = require(file, where, entry, "request");
    JsonNode response = require(file, where, entry, "response");
    HeaderList requestHeaders = new HeaderList();
    requestHeaders.set(":method", request.path("method").asText("POST").toUpperCase(Locale.ROOT));
    target(file, where, request.path("url").asText(""), requestHeaders);
    headers(file, where + ".request.headers", request.path("headers"), requestHeaders, false);
    HeaderList responseHeaders = new HeaderList();
    JsonNode status = response.path("status");
    if (!status.canConvertToInt() || status.asInt() < 100 || status.asInt() > 599) {
      throw new ReplayInputException(file, where + ".response.status: expected a status code, got " + status);
    }
    responseHeaders.set(":status", Integer.toString(status.asInt()));
    headers(file, where + ".response.headers", response.path("headers"), responseHeaders, true);
    byte[] requestBody = text(file, where + ".request.postData", request.path("postData"));
    byte[] responseBody = text(file, where + ".response.content", response.path("content"));
    String cluster = entry.hasNonNull("_cluster") ? entry.get("_cluster").asText() : null;
    return new ReplayLeg(requestHeaders, requestBody, responseHeaders, responseBody, cluster);
  }

  private static JsonNode require(Path file, String where, JsonNode entry, String field) throws ReplayInputException {
    JsonNode node = entry.path(field);
    if (!node.isObject()) {
      throw new ReplayInputException(file, where + "." + field + ": missing");
    }
    return node;
  }

  /** {@code :path} (and {@code :authority}, {@code :scheme} for an absolute URL). */
  private static void target(Path file, String where, String url, HeaderList headers) throws ReplayInputException {
    if (url.isEmpty()) {
      throw new ReplayInputException(file, where + ".request.url: missing");
    }
    if (url.startsWith("/")) {
      headers.set(":path", url);
      return;
    }
    try {
      URI uri = new URI(url);
      if (uri.getRawAuthority() == null || uri.getScheme() == null) {
        throw new URISyntaxException(url, "expected an absolute URL or a path");
      }
      String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
      headers.set(":path", uri.getRawQuery() == null ? path : path + "?" + uri.getRawQuery());
      headers.set(":authority", uri.getRawAuthority());
      headers.set(":scheme", uri.getScheme().toLowerCase(Locale.ROOT));
    } catch (URISyntaxException e) {
      throw new ReplayInputException(file, where + ".request.url: " + e.getMessage(), e);
    }
  }

  /** HAR {@code [{"name": ..., "value": ...}]}; pseudo-headers and hop-by-hop headers are Envoy's to set. */
  private static void headers(Path file, String where, JsonNode list, HeaderList into, boolean response)
      throws ReplayInputException {
    if (list.isMissingNode()) {
      return;
    }
    if (!list.isArray()) {
      throw new ReplayInputException(file, where + ": expected a list of {\"name\", \"value\"}");
    }
    for (JsonNode h : list) {
      if (!h.path("name").isTextual() || !h.path("value").isValueNode()) {
        throw new ReplayInputException(file, where + ": expected {\"name\": ..., \"value\": ...}, got " + h);
      }
      String name = h.get("name").asText().toLowerCase(Locale.ROOT);
      String value = h.get("value").asText();
      if (name.startsWith(":") || HeadersFile.HOP_BY_HOP.contains(name)) {
        continue;
      }
      if (name.equals("host") && !response) {
        into.set(":authority", value);
      } else {
        into.add(name, value);
      }
    }
  }

  /** A HAR text object's bytes: UTF-8 text, or base64 with {@code "encoding": "base64"}; empty when absent. */
  private static byte[] text(Path file, String where, JsonNode content) throws ReplayInputException {
    if (!content.isObject() || !content.has("text")) {
      return new byte[0];
    }
    String text = content.path("text").asText();
    if ("base64".equalsIgnoreCase(content.path("encoding").asText(""))) {
      try {
        return Base64.getDecoder().decode(text.replaceAll("\\s", ""));
      } catch (IllegalArgumentException e) {
        throw new ReplayInputException(file, where + ".text: not base64: " + e.getMessage(), e);
      }
    }
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
