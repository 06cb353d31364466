package io.disaggusage.extproc.rewrite;

/**
 * How much of a response body a processor may hold ({@code limits.*}); past a bound the body passes
 * through unchanged.
 *
 * @param maxBodyBytes a whole JSON body held for rewriting
 * @param maxEventBytes one SSE event held for rewriting
 * @param maxUsageBytes one usage object rewritten
 */
public record BodyLimits(int maxBodyBytes, int maxEventBytes, int maxUsageBytes) {}
