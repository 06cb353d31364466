package io.disaggusage.extproc.tools.sandbox;

import java.net.URI;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A printed {@code curl URL -H 'name: value' -d 'body'} line, split into words as a POSIX shell splits
 * it (single quotes, backslash escapes outside them), so a test sends exactly what a user's shell would.
 */
public record CurlLine(URI url, Map<String, String> headers, String body) {

  public static CurlLine parse(String line) {
    List<String> words = shellWords(line.strip());
    if (words.isEmpty() || !words.get(0).equals("curl")) {
      throw new IllegalArgumentException("not a curl line: " + line);
    }
    URI url = null;
    Map<String, String> headers = new LinkedHashMap<>();
    String body = null;
    for (int i = 1; i < words.size(); i++) {
      String word = words.get(i);
      switch (word) {
        case "-H" -> {
          String header = words.get(++i);
          int colon = header.indexOf(':');
          headers.put(header.substring(0, colon).trim(), header.substring(colon + 1).trim());
        }
        case "-d" -> body = words.get(++i);
        default -> {
          if (!word.startsWith("-")) {
            url = URI.create(word);
          }
        }
      }
    }
    if (url == null || body == null) {
      throw new IllegalArgumentException("a curl line without URL or -d body: " + line);
    }
    return new CurlLine(url, headers, body);
  }

  /** The same request to another URL. */
  public CurlLine withUrl(String other) {
    return new CurlLine(URI.create(other), headers, body);
  }

  static List<String> shellWords(String line) {
    List<String> words = new ArrayList<>();
    StringBuilder word = null;
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (c == '\'') {
        int end = line.indexOf('\'', i + 1);
        if (end < 0) {
          throw new IllegalArgumentException("unterminated single quote in: " + line);
        }
        word = word == null ? new StringBuilder() : word;
        word.append(line, i + 1, end);
        i = end;
      } else if (c == '\\' && i + 1 < line.length()) {
        word = word == null ? new StringBuilder() : word;
        word.append(line.charAt(++i));
      } else if (Character.isWhitespace(c)) {
        if (word != null) {
          words.add(word.toString());
          word = null;
        }
      } else {
        word = word == null ? new StringBuilder() : word;
        word.append(c);
      }
    }
    if (word != null) {
      words.add(word.toString());
    }
    return words;
  }
}
