/**
 * How an enum constant becomes the word that metrics, dynamic metadata and the documentation show for
 * it. This package sits below every other one of the core, so that any of them can label with it.
 */
package io.disaggusage.extproc.label;
