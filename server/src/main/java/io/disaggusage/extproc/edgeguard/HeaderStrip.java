package io.disaggusage.extproc.edgeguard;

import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Which request headers the edge guard removes: every {@code x-disagg-*} header (the orchestrator's
 * instructions to the usage service) and the configured names ({@code edge_guard.remove_headers}).
 * Only headers the request carries are named in the mutation. Immutable.
 */
final class HeaderStrip {
  /** The family the usage service reads its instructions from. */
  static final String FAMILY = "x-disagg-";
  /** The metric label of a family member that is not a known name, so clients cannot mint labels. */
  static final String OTHER_IN_FAMILY = "x-disagg-*";
  /** The family's names the usage service reads (docs/reliability.md). */
  private static final Set<String> KNOWN = Set.of("x-disagg-phase", "x-disagg-request-id", "x-disagg-order");

  private final Set<String> configured;

  HeaderStrip(List<String> configured) {
    this.configured = Set.copyOf(configured);
  }

  /** The headers of {@code headers} to remove, lower case, each once, in the order they came. */
  Set<String> present(HeaderMap headers) {
    Set<String> names = new LinkedHashSet<>();
    for (HeaderValue header : headers.getHeadersList()) {
      String name = header.getKey().toLowerCase(Locale.ROOT);
      if (name.startsWith(FAMILY) || configured.contains(name)) {
        names.add(name);
      }
    }
    return names;
  }

  /** The metric label of a removed header: its name, or {@link #OTHER_IN_FAMILY}. */
  String label(String name) {
    return KNOWN.contains(name) || configured.contains(name) ? name : OTHER_IN_FAMILY;
  }

  /** A mutation removing {@code names} and {@code more}; null when both are empty. */
  static HeaderMutation removing(Set<String> names, String... more) {
    if (names.isEmpty() && more.length == 0) {
      return null;
    }
    HeaderMutation.Builder mutation = HeaderMutation.newBuilder().addAllRemoveHeaders(names);
    for (String name : more) {
      mutation.addRemoveHeaders(name);
    }
    return mutation.build();
  }
}
