package io.disaggusage.extproc.config;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * {@code grpc.listen} parsed: every interface, one host or address, or a Unix domain socket.
 *
 * <ul>
 *   <li>empty: TCP on every interface, port {@code grpc.port}
 *   <li>{@code 127.0.0.1}, {@code ::1}, {@code [::1]}, {@code localhost}: TCP on that address, port {@code
 *       grpc.port} (a name is resolved when the server starts)
 *   <li>{@code unix:///run/disagg-usage/extproc.sock}: a Unix domain socket at that absolute path
 * </ul>
 *
 * @param kind which of the three
 * @param host the host or address for {@link Kind#HOST} (IPv6 without brackets), else null
 * @param socketPath the socket file for {@link Kind#UNIX}, else null
 */
public record ListenAddress(Kind kind, String host, Path socketPath) {

  /** The scheme prefix of a Unix domain socket address. */
  public static final String UNIX_PREFIX = "unix://";

  /**
   * Longest socket path Linux accepts: {@code sun_path} is 108 bytes including the terminating NUL.
   */
  public static final int MAX_SOCKET_PATH_BYTES = 107;

  private static final Pattern HOST_NAME = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?");
  private static final Pattern IPV6 = Pattern.compile("[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?");

  /** The three forms of {@code grpc.listen}. */
  public enum Kind {
    /** TCP on every interface. */
    ALL_INTERFACES,
    /** TCP on one address. */
    HOST,
    /** A Unix domain socket. */
    UNIX
  }

  public ListenAddress {
    Objects.requireNonNull(kind, "kind");
  }

  /**
   * Parses {@code grpc.listen}.
   *
   * @throws IllegalArgumentException with a message for the operator when the text is none of the forms
   */
  public static ListenAddress parse(String text) {
    String s = text.trim();
    if (s.isEmpty()) {
      return new ListenAddress(Kind.ALL_INTERFACES, null, null);
    }
    if (s.regionMatches(true, 0, "unix:", 0, 5)) {
      return unix(text, s);
    }
    if (s.contains("://")) {
      throw new IllegalArgumentException(
          "\"" + text + "\" is not a host or a unix:// socket path (no other scheme is supported)");
    }
    if (s.startsWith("[")) {
      if (!s.endsWith("]") || !IPV6.matcher(s.substring(1, s.length() - 1)).matches()) {
        throw new IllegalArgumentException(
            "\"" + text + "\" must be a host or address without a port (the port is grpc.port)");
      }
      return new ListenAddress(Kind.HOST, s.substring(1, s.length() - 1), null);
    }
    long colons = s.chars().filter(c -> c == ':').count();
    if (colons == 1) {
      throw new IllegalArgumentException(
          "\"" + text + "\" must be a host or address without a port (the port is grpc.port)");
    }
    if (colons > 1) {
      if (!IPV6.matcher(s).matches()) {
        throw new IllegalArgumentException("\"" + text + "\" is not a valid IPv6 address");
      }
      return new ListenAddress(Kind.HOST, s, null);
    }
    if (!HOST_NAME.matcher(s).matches()) {
      throw new IllegalArgumentException(
          "\"" + text + "\" is not a valid host name or address (expected e.g. 127.0.0.1, ::1 or localhost)");
    }
    return new ListenAddress(Kind.HOST, s, null);
  }

  private static ListenAddress unix(String text, String s) {
    String example = "e.g. unix:///run/disagg-usage/extproc.sock";
    if (!s.regionMatches(true, 0, UNIX_PREFIX, 0, UNIX_PREFIX.length())) {
      throw new IllegalArgumentException(
          "\"" + text + "\" must be unix:// followed by an absolute path, " + example);
    }
    String path = s.substring(UNIX_PREFIX.length());
    if (!path.startsWith("/")) {
      throw new IllegalArgumentException(
          "\"" + text + "\" must be unix:// followed by an absolute path, " + example);
    }
    if (path.endsWith("/")) {
      throw new IllegalArgumentException("\"" + text + "\" names a directory, not a socket file, " + example);
    }
    if (path.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("\"" + text + "\" contains a NUL character");
    }
    int bytes = path.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > MAX_SOCKET_PATH_BYTES) {
      throw new IllegalArgumentException(
          "socket path is "
              + bytes
              + " bytes long; Unix socket paths are limited to "
              + MAX_SOCKET_PATH_BYTES
              + " bytes");
    }
    return new ListenAddress(Kind.UNIX, null, Path.of(path).normalize());
  }

  /** True for a Unix domain socket. */
  public boolean isUnix() {
    return kind == Kind.UNIX;
  }

  /** How the start-up line names the listener, with the port the server actually bound. */
  public String describe(int boundPort) {
    return switch (kind) {
      case ALL_INTERFACES -> "port " + boundPort;
      case HOST -> (host.contains(":") ? "[" + host + "]" : host) + ":" + boundPort;
      case UNIX -> UNIX_PREFIX + socketPath;
    };
  }
}
