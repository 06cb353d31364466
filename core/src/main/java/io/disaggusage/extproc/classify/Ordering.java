package io.disaggusage.extproc.classify;

/** Whether a generation exchange may see its context usage only later (behaviour.md §4). */
public enum Ordering {
  /** The context response has fully passed before the generation request: a miss means no context. */
  CONTEXT_FIRST,
  /** Context and generation run concurrently, or generation first: wait for the context usage. */
  CONCURRENT
}
