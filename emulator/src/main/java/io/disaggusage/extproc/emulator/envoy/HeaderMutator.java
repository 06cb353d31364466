package io.disaggusage.extproc.emulator.envoy;

import io.envoyproxy.envoy.config.common.mutation_rules.v3.HeaderMutationRules;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * Applies a {@code HeaderMutation} the way Envoy's {@code MutationUtils::applyHeaderMutations} and
 * the mutation-rules {@code Checker} do: removes first, then sets; only {@code raw_value} is read
 * (a {@code value}-only header becomes an empty header, both set is an error); {@code append} true
 * adds, unset/false overwrites, {@code append_action} ignored; refused mutations are skipped and
 * counted unless {@code disallow_is_error}.
 */
final class HeaderMutator {

  /** A mutation that makes Envoy answer with a local reply (status_on_error, 500). */
  static final class InvalidMutationException extends Exception {
    InvalidMutationException(String message) {
      super(message);
    }
  }

  private enum Check {
    OK,
    IGNORE,
    FAIL
  }

  private enum Op {
    SET,
    APPEND,
    REMOVE
  }

  static final int MAX_HEADERS_COUNT = 100;
  static final int MAX_HEADERS_BYTES = 60 * 1024;
  private static final Pattern TOKEN = Pattern.compile("[!#$%&'*+\\-.^_`|~0-9a-zA-Z]+");

  private final HeaderMutationRules rules;
  private final Pattern allow;
  private final Pattern disallow;

  HeaderMutator(HeaderMutationRules rules) {
    this.rules = rules;
    this.allow = rules.hasAllowExpression() ? Pattern.compile(rules.getAllowExpression().getRegex()) : null;
    this.disallow =
        rules.hasDisallowExpression() ? Pattern.compile(rules.getDisallowExpression().getRegex()) : null;
  }

  /**
   * @param dropContentLength skip {@code content-length} sets (STREAMED / BUFFERED_PARTIAL /
   *     BUFFERED with SKIP headers)
   * @param replacingMessage CONTINUE_AND_REPLACE: {@code :method} may be changed
   * @param rejected called once per refused mutation
   */
  void apply(
      HeaderMutation mutation,
      HeaderList headers,
      boolean dropContentLength,
      boolean replacingMessage,
      Runnable rejected)
      throws InvalidMutationException {
    for (String name : mutation.getRemoveHeadersList()) {
      if (!validName(name)) {
        throw new InvalidMutationException("Invalid character in remove_headers mutation.");
      }
      String key = name.toLowerCase(Locale.ROOT);
      switch (check(Op.REMOVE, key, "")) {
        case OK -> headers.remove(key);
        case IGNORE -> rejected.run();
        case FAIL -> throw new InvalidMutationException("Invalid attempt to remove " + key);
      }
    }
    for (HeaderValueOption option : mutation.getSetHeadersList()) {
      if (!option.hasHeader()) {
        continue;
      }
      var header = option.getHeader();
      if (!header.getValue().isEmpty() && !header.getRawValue().isEmpty()) {
        throw new InvalidMutationException(
            "Only one of value or raw_value in the HeaderValue message should be set, may not both"
                + " be set.");
      }
      String key = header.getKey().toLowerCase(Locale.ROOT);
      String value = header.getRawValue().toString(StandardCharsets.UTF_8);
      if (dropContentLength && key.equals("content-length")) {
        continue;
      }
      boolean append = option.hasAppend() && option.getAppend().getValue();
      Op op = append && headers.contains(key) ? Op.APPEND : Op.SET;
      Check result = check(op, key, value);
      if (replacingMessage && key.equals(":method")) {
        result = Check.OK;
      }
      switch (result) {
        case OK -> {
          if (!validName(key) || !validValue(value)) {
            throw new InvalidMutationException("Invalid character in set_headers mutation.");
          }
          if (append) {
            headers.add(key, value);
          } else {
            headers.set(key, value);
          }
        }
        case IGNORE -> rejected.run();
        case FAIL -> throw new InvalidMutationException("Invalid attempt to modify " + key);
      }
    }
    if (headers.size() > MAX_HEADERS_COUNT || headers.byteSize() > MAX_HEADERS_BYTES) {
      throw new InvalidMutationException("Header map size exceeded the limit");
    }
  }

  /** ImmediateResponse header mutations: applied with the same rules, failures only ignored. */
  void applyLenient(HeaderMutation mutation, HeaderList headers, Runnable rejected) {
    try {
      apply(mutation, headers, false, false, rejected);
    } catch (InvalidMutationException e) {
      // Envoy only logs failures of immediate-response header mutations.
    }
  }

  private Check check(Op op, String name, String value) {
    Check refused = bool(rules.hasDisallowIsError(), rules.getDisallowIsError().getValue())
        ? Check.FAIL
        : Check.IGNORE;
    if (op != Op.REMOVE && !validSpecialValue(name, value)) {
      return refused;
    }
    if (op == Op.REMOVE && (name.startsWith(":") || name.equals("host"))) {
      return refused;
    }
    if (op == Op.APPEND && name.startsWith(":")) {
      return refused;
    }
    return allowed(name) ? Check.OK : refused;
  }

  private boolean allowed(String name) {
    if (bool(rules.hasDisallowAll(), rules.getDisallowAll().getValue())) {
      return false;
    }
    if (disallow != null && disallow.matcher(name).matches()) {
      return false;
    }
    if (allow != null && allow.matcher(name).matches()) {
      return true;
    }
    boolean allowRouting = bool(rules.hasAllowAllRouting(), rules.getAllowAllRouting().getValue());
    if (name.startsWith(":")) {
      if (bool(rules.hasDisallowSystem(), rules.getDisallowSystem().getValue())) {
        return false;
      }
      if (name.equals(":authority") || name.equals(":method") || name.equals(":scheme")) {
        return allowRouting;
      }
      return true;
    }
    if (name.equals("host")) {
      return allowRouting;
    }
    if (name.startsWith("x-envoy-")) {
      return bool(rules.hasAllowEnvoy(), rules.getAllowEnvoy().getValue());
    }
    return true;
  }

  private static boolean validSpecialValue(String name, String value) {
    if (name.equals(":status")) {
      try {
        int status = Integer.parseInt(value);
        return status >= 200 && status < 1000;
      } catch (NumberFormatException e) {
        return false;
      }
    }
    if (name.equals(":scheme")) {
      return value.equals("http") || value.equals("https");
    }
    return true;
  }

  private static boolean bool(boolean has, boolean value) {
    return has && value;
  }

  static boolean validName(String name) {
    if (name.isEmpty()) {
      return false;
    }
    String token = name.startsWith(":") ? name.substring(1) : name;
    return !token.isEmpty() && TOKEN.matcher(token).matches();
  }

  static boolean validValue(String value) {
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c == '\r' || c == '\n' || c == 0) {
        return false;
      }
    }
    return true;
  }
}
