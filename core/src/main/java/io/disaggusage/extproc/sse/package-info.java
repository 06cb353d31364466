/**
 * Server-Sent-Events framing for streamed LLM responses (behaviour.md §5).
 *
 * <p>{@link io.disaggusage.extproc.sse.SseFramer} turns a byte stream that arrives in arbitrary
 * chunks into {@link io.disaggusage.extproc.sse.SseEvent}s (exact raw bytes plus the parsed event
 * type and data payload) and {@link io.disaggusage.extproc.sse.SsePassThrough} pieces, independently
 * of how the stream was chunked. It has no dependencies beyond the JDK and does no I/O.
 */
package io.disaggusage.extproc.sse;
