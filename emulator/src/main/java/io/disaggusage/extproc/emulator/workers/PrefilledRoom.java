package io.disaggusage.extproc.emulator.workers;

/**
 * What a SGLang prefill hands the decode for one {@code bootstrap_room} with the KV: the prompt length
 * and the prefill's own prefix-cache count (SGLang ships it in the KV metadata buffer, engines.md §4.2).
 */
record PrefilledRoom(long promptTokens, long cachedTokens) {}
