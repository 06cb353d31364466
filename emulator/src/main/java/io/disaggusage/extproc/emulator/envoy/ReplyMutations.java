package io.disaggusage.extproc.emulator.envoy;

import io.disaggusage.extproc.driver.ReplyRules;
import io.disaggusage.extproc.emulator.envoy.HeaderMutator.InvalidMutationException;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import java.util.function.Consumer;

/**
 * Applies the header and body mutations of the processor's replies (Envoy's mutation utils): header
 * mutations through the {@link HeaderMutator}'s rules with refusals counted, a buffered body's
 * replacement checked against the declared content-length, clear_route_cache counted as ignored or
 * disabled. Kept apart so the processor states only decide when a mutation applies, not how.
 */
final class ReplyMutations {
  private final HeaderMutator mutator;
  private final FilterConfig config;
  private final Consumer<String> counters;

  ReplyMutations(HeaderMutator mutator, FilterConfig config, Consumer<String> counters) {
    this.mutator = mutator;
    this.config = config;
    this.counters = counters;
  }

  /** See {@link HeaderMutator#apply}; refused mutations count as rejected_header_mutations. */
  void applyHeaders(
      HeaderMutation mutation, HeaderList headers, boolean dropContentLength, boolean replacingMessage)
      throws InvalidMutationException {
    mutator.apply(mutation, headers, dropContentLength, replacingMessage, this::rejected);
  }

  /** An immediate response's headers: invalid mutations are skipped, not errors. */
  void applyToLocalReply(HeaderMutation mutation, HeaderList headers) {
    mutator.applyLenient(mutation, headers, this::rejected);
  }

  /**
   * A buffered body reply's body mutation applied to {@code body}; while the headers are still held,
   * a replacement whose length differs from their content-length is an error.
   */
  byte[] mutateBufferedBody(
      byte[] body, BodyMutation mutation, HeaderList headers, boolean headersForwarded)
      throws InvalidMutationException {
    if (!headersForwarded && headers.contains("content-length")) {
      long declared;
      try {
        declared = Long.parseLong(headers.get("content-length").orElseThrow().trim());
      } catch (NumberFormatException e) {
        declared = -1;
      }
      if (declared >= 0 && declared != mutationLength(mutation)) {
        throw new InvalidMutationException(
            "mismatch between content length and the length of the mutated body");
      }
    }
    return ReplyRules.mutatedBody(body, mutation);
  }

  /** clear_route_cache only counts on the request path: ignored without header mutations, or disabled. */
  void clearRouteCache(boolean isRequest, CommonResponse common) {
    if (!isRequest) {
      return;
    }
    if (!common.hasHeaderMutation()) {
      if (common.getClearRouteCache()) {
        counters.accept(EnvoyStats.CLEAR_ROUTE_CACHE_IGNORED);
      }
      return;
    }
    if (common.getClearRouteCache() && config.clearRouteCacheDisabled()) {
      counters.accept(EnvoyStats.CLEAR_ROUTE_CACHE_DISABLED);
    }
  }

  private static long mutationLength(BodyMutation m) {
    return m.getMutationCase() == BodyMutation.MutationCase.BODY ? m.getBody().size() : 0;
  }

  private void rejected() {
    counters.accept(EnvoyStats.REJECTED_HEADER_MUTATIONS);
  }
}
