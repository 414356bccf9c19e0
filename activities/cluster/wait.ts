// The one way activities wait for the cluster. Watches wake the wait as soon as something changes, and every check
// reads the world afresh (level-triggered), so a missed or reordered watch event can only delay a check, never
// mislead it. A tick every `pollMs` covers what no watch delivers (Events, logs, HTTP) and is the heartbeat cadence.
//
// Watch errors, one policy: a refusal no retry fixes (403 Forbidden: the Role lacks `watch`) fails the wait, so a
// missing permission shows at once; anything else (a dropped connection, 410 Gone, a 5xx) falls back to polling and
// the watch is established again on the next tick.
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { Cluster } from './api.js';

/** A collection whose changes wake the wait, e.g. `/apis/batch/v1/namespaces/ns/jobs` with a field selector. */
interface Watched {
  path: string;
  query: Record<string, string | undefined>;
}

/** Why a check runs: the first one, a watched change, or the periodic tick (at most `pollMs` apart). */
type WaitTrigger = 'start' | 'change' | 'tick';

export interface WaitOptions<T> {
  /** Reads the world; returns the result when the wait is over, undefined to keep waiting. */
  check: (trigger: WaitTrigger) => Promise<T | undefined>;
  watches?: Watched[];
  pollMs: number;
  /** When the next tick is due, if sooner than `pollMs` (a check backing off from a short first pause); read after
   * each check. */
  nextTickMs?: () => number;
  /** Epoch ms after which the wait gives up and returns undefined; unset waits until cancelled. */
  deadline?: number;
  /** The activity's cancellation signal: the wait ends at once with its reason (a `CancelledFailure`). */
  signal: AbortSignal;
}

/** The shortest pause between two checks, so that a burst of watch events costs one check. */
const MIN_GAP_MS = 150;
const A_WEEK_MS = 7 * 24 * 3_600_000;

/**
 * Resolves after `ms`, or earlier (without error) when `signal` aborts or the function handed to `onWakeable` is
 * called.
 */
function pause(ms: number, signal?: AbortSignal, onWakeable?: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done);
    onWakeable?.(done);
  });
}

/** Throws the reason of an aborted cancellation signal (a `CancelledFailure` inside an activity). */
function throwIfCancelled(signal: AbortSignal): void {
  if (!signal.aborted) return;
  throw signal.reason instanceof Error ? signal.reason : new CancelledFailure('activity cancelled');
}

/**
 * Calls `check` until it returns a value (returned), the deadline passes (undefined), or the activity is cancelled
 * (its `CancelledFailure`). Checks never overlap. Throws what `check` throws, and a watch's permanent refusal.
 */
export async function waitFor<T>(cluster: Cluster, opts: WaitOptions<T>): Promise<T | undefined> {
  const stopWatches = new AbortController();
  let changed = false;
  let wake: (() => void) | undefined;
  let refused: ApplicationFailure | undefined;
  const broken = new Set<Watched>();
  const onChange = () => {
    changed = true;
    wake?.();
    return false;
  };
  const hold = (w: Watched) => {
    broken.delete(w);
    cluster
      .watchUntil(w.path, w.query, onChange, { signal: stopWatches.signal, timeoutMs: A_WEEK_MS })
      .catch((err: unknown) => {
        if (err instanceof ApplicationFailure && err.nonRetryable) {
          refused ??= err;
          wake?.();
        } else {
          broken.add(w);
        }
      });
  };
  const watches = opts.watches ?? [];
  watches.forEach(hold);
  try {
    let trigger: WaitTrigger = 'start';
    let lastTick = Date.now();
    for (;;) {
      throwIfCancelled(opts.signal);
      if (refused) throw refused;
      changed = false;
      if (trigger !== 'change') lastTick = Date.now();
      const result = await opts.check(trigger);
      if (result !== undefined) return result;
      throwIfCancelled(opts.signal);
      const left = opts.deadline === undefined ? Infinity : opts.deadline - Date.now();
      if (left <= 0) return undefined;
      const tickMs = Math.min(opts.nextTickMs?.() ?? opts.pollMs, opts.pollMs);
      const untilTick = Math.min(Math.max(0, lastTick + tickMs - Date.now()), left);
      await pause(Math.min(MIN_GAP_MS, untilTick), opts.signal);
      if (!changed && !refused) {
        await pause(untilTick - MIN_GAP_MS, opts.signal, (w) => (wake = w));
        wake = undefined;
      }
      const tickDue = Date.now() >= lastTick + tickMs;
      trigger = tickDue ? 'tick' : 'change';
      if (tickDue) [...broken].forEach(hold);
    }
  } finally {
    stopWatches.abort();
  }
}
