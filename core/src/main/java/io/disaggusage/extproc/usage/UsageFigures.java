package io.disaggusage.extproc.usage;

import java.math.BigInteger;

/**
 * The numbers of one emitted usage object, for dynamic metadata and metrics.
 *
 * @param reportedCached what the generation worker itself said was cached; null when it said nothing
 */
public record UsageFigures(
    BigInteger prompt,
    BigInteger cached,
    BigInteger completion,
    BigInteger total,
    BigInteger reportedCached) {}
