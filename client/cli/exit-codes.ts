// Exit codes scripts rely on; `ferry --help` lists them. Which error gets which: `exitCodeOf` in exit-of.ts (this module
// imports nothing, so `ferry --help` and `--version` can use it without loading the client library).
export const EXIT = {
  /** Done. */
  ok: 0,
  /** The model failed (or the command failed for another reason). */
  failed: 1,
  /** Bad usage, an invalid spec, or a spec that conflicts with the running one. */
  usage: 2,
  /** No such model. */
  notFound: 3,
  /** A wait ran out of time. */
  timeout: 4,
  /** Temporal (or its namespace, or a worker for the model's cluster) cannot be reached. */
  unavailable: 5,
  /** Interrupted (Ctrl-C). */
  interrupted: 130,
  /** What it printed is not read any more (`ferry list | head -1`): 128 + SIGPIPE, as a tool the signal ends. */
  brokenPipe: 141,
} as const;
