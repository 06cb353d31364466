package io.disaggusage.extproc.tools.replay;

import io.disaggusage.extproc.emulator.envoy.HeaderList;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A leg's headers as a text file: one {@code name: value} per line, pseudo-headers written the same
 * way ({@code :method: POST}, {@code :path: /v1/chat/completions}, {@code :status: 200}). Blank lines and
 * lines starting with {@code #} are skipped. An HTTP/1 start line ({@code POST /v1/completions HTTP/1.1},
 * {@code HTTP/1.1 200 OK}) may come first, so {@code curl -D} dumps work as they are; {@code host}
 * becomes {@code :authority}.
 */
public final class HeadersFile {
  /** Header field names (RFC 9110 tokens). */
  private static final Pattern NAME = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
  private static final Pattern REQUEST_LINE = Pattern.compile("([A-Z]+) (\\S+) HTTP/\\d(?:\\.\\d)?");
  private static final Pattern STATUS_LINE = Pattern.compile("HTTP/\\d(?:\\.\\d)? (\\d{3})(?: .*)?");
  private static final Set<String> REQUEST_PSEUDO = Set.of(":method", ":path", ":authority", ":scheme");
  /** Connection-specific headers Envoy's codecs consume instead of passing them to filters. */
  static final Set<String> HOP_BY_HOP =
      Set.of("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade");

  private HeadersFile() {}

  /** Request headers; missing pseudo-headers are left to {@link ReplayLeg}'s defaults. */
  public static HeaderList readRequest(Path file) throws ReplayInputException {
    return read(file, false);
  }

  /** Response headers; {@code :status} must be a three-digit status when present. */
  public static HeaderList readResponse(Path file) throws ReplayInputException {
    return read(file, true);
  }

  private static HeaderList read(Path file, boolean response) throws ReplayInputException {
    List<String> lines;
    try {
      lines = Files.readAllLines(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new ReplayInputException(file, "cannot read headers: " + IoProblems.describe(e), e);
    }
    HeaderList headers = new HeaderList();
    boolean first = true;
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i).strip();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      if (first && startLine(line, response, headers)) {
        first = false;
        continue;
      }
      first = false;
      add(file, i + 1, line, response, headers);
    }
    return headers;
  }

  /** An HTTP/1 request or status line, turned into pseudo-headers; false when the line is not one. */
  private static boolean startLine(String line, boolean response, HeaderList headers) {
    Matcher m = (response ? STATUS_LINE : REQUEST_LINE).matcher(line);
    if (!m.matches()) {
      return false;
    }
    if (response) {
      headers.set(":status", m.group(1));
    } else {
      headers.set(":method", m.group(1)).set(":path", m.group(2));
    }
    return true;
  }

  private static void add(Path file, int lineNumber, String line, boolean response, HeaderList headers)
      throws ReplayInputException {
    int colon = line.indexOf(':', line.startsWith(":") ? 1 : 0);
    if (colon <= 0) {
      throw new ReplayInputException(file, "line " + lineNumber + ": expected \"name: value\", got \"" + line + "\"");
    }
    String name = line.substring(0, colon).strip().toLowerCase(Locale.ROOT);
    String value = line.substring(colon + 1).strip();
    boolean pseudo = name.startsWith(":");
    if (!NAME.matcher(pseudo ? name.substring(1) : name).matches()) {
      throw new ReplayInputException(file, "line " + lineNumber + ": invalid header name \"" + name + "\"");
    }
    if (pseudo && !(response ? Set.of(":status") : REQUEST_PSEUDO).contains(name)) {
      throw new ReplayInputException(
          file,
          "line " + lineNumber + ": " + name + " is not a " + (response ? "response" : "request") + " pseudo-header"
              + " (" + (response ? ":status" : String.join(", ", REQUEST_PSEUDO.stream().sorted().toList())) + ")");
    }
    if (name.equals(":status") && !value.matches("[1-5]\\d\\d")) {
      throw new ReplayInputException(file, "line " + lineNumber + ": :status must be a status code, got \"" + value + "\"");
    }
    if (HOP_BY_HOP.contains(name)) {
      return;
    }
    if (name.equals("host") && !response) {
      headers.set(":authority", value);
      return;
    }
    if (pseudo) {
      headers.set(name, value);
    } else {
      headers.add(name, value);
    }
  }
}
