// The one way the storage and puller activities wait for the cluster: re-check on every watch event (prompt) and
// every `pollMs` (a backstop for what no watch covers, and the heartbeat cadence), until the check says done, time
// runs out, or the activity is cancelled.
import { CancelledFailure } from '@temporalio/common';
import type { Cluster, WatchEvent } from './api';

/** A collection to watch while waiting; `onEvent` updates the caller's state before the re-check. */
export interface WaitWatch {
  /** e.g. `/apis/batch/v1/namespaces/ns/jobs` */
  path: string;
  query: Record<string, string | undefined>;
  onEvent?: (ev: WatchEvent<unknown>) => void;
}

export type WaitTrigger = 'start' | 'event' | 'tick';

export interface WaitOptions<T> {
  /** Returns the result when the wait is over, undefined to keep waiting. `trigger` says why it runs. */
  check: (trigger: WaitTrigger) => Promise<T | undefined>;
  watches?: WaitWatch[];
  pollMs: number;
  timeoutMs: number;
  /** The activity's cancellation signal: the wait ends at once with its reason (a `CancelledFailure`). */
  signal: AbortSignal;
}

/**
 * Resolves after `ms`, or earlier (without error) when `signal` aborts or the function handed to `onWakeable` is
 * called.
 */
export function pause(ms: number, signal?: AbortSignal, onWakeable?: (wake: () => void) => void): Promise<void> {
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
export function throwIfCancelled(signal: AbortSignal): void {
  if (!signal.aborted) return;
  throw signal.reason instanceof Error ? signal.reason : new CancelledFailure('activity cancelled');
}

/**
 * Waits until `check` returns a value and returns it; undefined when `timeoutMs` passed first. Checks never overlap:
 * what triggers one during a check causes one more check afterwards. Throws what `check` or a watch throws, and the
 * cancellation reason when `signal` aborts.
 */
export async function waitUntil<T>(cluster: Cluster, opts: WaitOptions<T>): Promise<T | undefined> {
  const { signal } = opts;
  throwIfCancelled(signal);
  const first = await opts.check('start');
  if (first !== undefined) return first;

  const end = Date.now() + opts.timeoutMs;
  const stop = new AbortController();
  const onCancel = () => stop.abort();
  signal.addEventListener('abort', onCancel);
  const outcome: { result?: T; failure?: { error: unknown } } = {};
  let inflight: Promise<void> | undefined;
  let pending: 'event' | 'tick' | undefined;

  const run = async (trigger: 'event' | 'tick'): Promise<void> => {
    try {
      let next: 'event' | 'tick' | undefined = trigger;
      while (next && !stop.signal.aborted) {
        pending = undefined;
        const r = await opts.check(next);
        if (r !== undefined) {
          outcome.result = r;
          stop.abort();
          return;
        }
        next = pending;
      }
    } catch (error) {
      outcome.failure ??= { error };
      stop.abort();
    } finally {
      inflight = undefined;
    }
  };
  const recheck = (trigger: 'event' | 'tick'): Promise<void> => {
    if (inflight) {
      // One more check after the running one; a tick outranks an event (it also heartbeats).
      pending = pending === 'tick' ? 'tick' : trigger;
      return inflight;
    }
    inflight = run(trigger);
    return inflight;
  };

  const ticks = async () => {
    while (!stop.signal.aborted && Date.now() < end) {
      await pause(Math.min(opts.pollMs, end - Date.now()), stop.signal);
      if (!stop.signal.aborted && Date.now() < end) await recheck('tick');
    }
    stop.abort();
  };
  const watches = (opts.watches ?? []).map((w) =>
    cluster
      .watchUntil<unknown>(
        w.path,
        w.query,
        async (ev) => {
          if (ev.type === 'BOOKMARK' || ev.type === 'ERROR') return false;
          w.onEvent?.(ev);
          await recheck('event');
          return stop.signal.aborted;
        },
        { signal: stop.signal, timeoutMs: Math.max(0, end - Date.now()) },
      )
      .catch((error: unknown) => {
        outcome.failure ??= { error };
        stop.abort();
      }),
  );
  try {
    await Promise.all([ticks(), ...watches]);
    // A check still running when time ran out may yet settle the wait.
    while (inflight) await inflight;
  } finally {
    signal.removeEventListener('abort', onCancel);
  }
  if (outcome.result !== undefined) return outcome.result;
  if (outcome.failure) throw outcome.failure.error;
  throwIfCancelled(signal);
  return undefined;
}
