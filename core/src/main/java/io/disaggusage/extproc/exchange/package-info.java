/**
 * The words every layer uses about one exchange: which leg of a disaggregated request it is ({@link
 * io.disaggusage.extproc.exchange.Phase}) and how it ended ({@link
 * io.disaggusage.extproc.exchange.Outcome}). The classifier decides the phase, the rewriters and the
 * stream report the outcome, metrics and dynamic metadata label with both; this package sits below
 * {@code classify} and {@code rewrite} so that neither imports the other to name them.
 */
package io.disaggusage.extproc.exchange;
