// Rules added after specs may already have been accepted without them: the positional-argument rule (2026-12), and
// the bounds of whole numbers, durations and quantities with the image reference grammar (`bounds`, later). A
// workflow replaying an update, a signal or a start accepted before a rule existed must accept it again, so the parse
// that replays it runs with those rules relaxed. Synchronous, so workflow code stays deterministic. Pure.

/** The rules that can be relaxed, each by the name its checks ask for. */
export type LaterRule = 'positional' | 'bounds';

let relaxed: readonly LaterRule[] = [];

/** Runs `parse` with every rule added after specs were accepted without it turned off (replays only). */
export function asAcceptedBefore<T>(parse: () => T): T {
  return withRelaxed(['positional', 'bounds'], parse);
}

/** Runs `parse` with only the bounds and the image grammar turned off (a replay guarded by its own patch). */
export function asAcceptedBeforeBounds<T>(parse: () => T): T {
  return withRelaxed(['bounds'], parse);
}

function withRelaxed<T>(rules: readonly LaterRule[], parse: () => T): T {
  const before = relaxed;
  relaxed = rules;
  try {
    return parse();
  } finally {
    relaxed = before;
  }
}

/** Whether `rule` is off: inside `asAcceptedBefore` (or, for the bounds, `asAcceptedBeforeBounds`). */
export function acceptedBefore(rule: LaterRule): boolean {
  return relaxed.includes(rule);
}
