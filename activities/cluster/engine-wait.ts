// How the engine activities wait on Kubernetes: watches wake the wait as soon as something changes, and every check
// reads the world afresh (level-triggered), so a missed or reordered watch event can only delay a check, never
// mislead it. The poll interval covers what no watch delivers (Events, HTTP) and a watch that cannot be held.
import type { Cluster } from './api';
import { pause, throwIfCancelled } from './wait';

export interface EngineWaitOptions {
  /** The activity's cancellation signal: the wait throws its CancelledFailure. */
  signal: AbortSignal;
  pollMs: number;
  /** Collections whose changes trigger a check at once. */
  watches: { path: string; query: Record<string, string> }[];
  /** Epoch ms after which the wait gives up and returns undefined. */
  deadline?: number;
}

/** The shortest pause between two checks, so that a burst of watch events costs one check. */
const MIN_GAP_MS = 150;
const A_WEEK_MS = 7 * 24 * 3_600_000;

/** Calls `check` until it returns a value (returned), the deadline passes (undefined), or the activity is cancelled. */
export async function waitForEngine<T>(
  cluster: Cluster,
  opts: EngineWaitOptions,
  check: () => Promise<T | undefined>,
): Promise<T | undefined> {
  const stopWatches = new AbortController();
  let changed = false;
  let wake: (() => void) | undefined;
  const onChange = () => {
    changed = true;
    wake?.();
    return false;
  };
  for (const w of opts.watches) {
    // Best effort: a watch the server refuses or drops only makes the wait fall back to polling.
    void cluster
      .watchUntil(w.path, w.query, onChange, { signal: stopWatches.signal, timeoutMs: A_WEEK_MS })
      .catch(() => undefined);
  }
  try {
    for (;;) {
      throwIfCancelled(opts.signal);
      changed = false;
      const result = await check();
      if (result !== undefined) return result;
      throwIfCancelled(opts.signal);
      const left = opts.deadline === undefined ? Infinity : opts.deadline - Date.now();
      if (left <= 0) return undefined;
      const ms = Math.min(opts.pollMs, left);
      await pause(Math.min(MIN_GAP_MS, ms), opts.signal);
      if (!changed) {
        await pause(Math.max(0, ms - MIN_GAP_MS), opts.signal, (w) => (wake = w));
        wake = undefined;
      }
    }
  } finally {
    stopWatches.abort();
  }
}

