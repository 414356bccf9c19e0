// Waiting for a model by polling its status: Ready after serve or update, Deleted after delete, any phase for watch.
import type { Client } from '@temporalio/client';
import type { ModelRef, ModelStatus, Phase } from '../workflows/contract/index.js';
import { ModelDeletedError, ModelFailedError, NoWorkerError, WaitTimeoutError } from './errors.js';
import { getModelStatus } from './model-status.js';

export interface WaitOptions {
  /** Give up after this long (`Infinity` waits for ever). */
  timeoutMs: number;
  /**
   * The spec generation the phase must be about: Ready counts once `observedGeneration` reaches it, Failed once an
   * attempt at it failed. Default: the model's generation when the wait starts.
   */
  generation?: number;
  /** Called with the first status and with every status that differs from the one before. */
  onStatus?: (status: ModelStatus) => void;
  /** Called when a poll finds no worker for the model's cluster; the wait goes on (a worker may be starting). */
  onNoWorker?: (error: NoWorkerError) => void;
  /** Default 1 s. */
  pollIntervalMs?: number;
  /** Stops the wait; it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Resolves with the status once the model is in one of `phases` at the generation waited for. Rejects with
 * `ModelFailedError` when it fails instead (unless Failed is one of `phases`), `ModelDeletedError` when it is
 * deleted instead, `WaitTimeoutError` (or `NoWorkerError`, if no worker ever answered) when time runs out.
 */
export async function waitForPhase(
  client: Client,
  ref: ModelRef,
  phases: readonly Phase[],
  options: WaitOptions,
): Promise<ModelStatus> {
  const { timeoutMs, onStatus, onNoWorker, pollIntervalMs = 1_000, signal } = options;
  const deadline = Date.now() + timeoutMs;
  let target = options.generation;
  let last: ModelStatus | undefined;
  let lastJson: string | undefined;
  let noWorker: NoWorkerError | undefined;

  for (;;) {
    signal?.throwIfAborted();
    let status: ModelStatus | undefined;
    try {
      status = signal
        ? await abortable(signal, (s) => client.withAbortSignal(s, () => getModelStatus(client, ref)))
        : await getModelStatus(client, ref);
      noWorker = undefined;
    } catch (err) {
      signal?.throwIfAborted();
      if (!(err instanceof NoWorkerError)) throw err;
      if (!noWorker) onNoWorker?.(err);
      noWorker = err;
    }
    if (status) {
      const json = JSON.stringify(status);
      if (json !== lastJson) onStatus?.(status);
      [last, lastJson] = [status, json];
      target ??= status.generation;
      const outcome = outcomeOf(status, phases, target);
      if (outcome === 'done') return status;
      if (outcome === 'failed') throw new ModelFailedError(ref, status.lastError, status);
      if (outcome === 'deleted') {
        throw new ModelDeletedError(
          ref,
          status.phase as 'Deleting' | 'Deleted',
          `it will not become ${phases.join(' or ')}`,
        );
      }
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      if (noWorker && !last) throw noWorker;
      throw new WaitTimeoutError(ref, timeoutMs, `become ${phases.join(' or ')}`, last, noWorker?.message);
    }
    await sleep(Math.min(pollIntervalMs, remaining), signal);
  }
}

/** What a status means for a wait for `phases` at `generation`. */
function outcomeOf(
  status: ModelStatus,
  phases: readonly Phase[],
  generation: number,
): 'done' | 'failed' | 'deleted' | 'pending' {
  if (phases.includes(status.phase) && atGeneration(status, generation)) return 'done';
  if (status.phase === 'Failed' && atGeneration(status, generation)) return 'failed';
  const deleting = status.phase === 'Deleting' || status.phase === 'Deleted';
  if (deleting && !phases.includes('Deleting') && !phases.includes('Deleted')) return 'deleted';
  return 'pending';
}

/** Whether the status's phase is about `generation` (or a newer one). */
function atGeneration(status: ModelStatus, generation: number): boolean {
  switch (status.phase) {
    case 'Ready':
    case 'Degraded':
      return status.observedGeneration >= generation;
    case 'Failed':
      return (status.lastError?.generation ?? status.generation) >= generation;
    case 'Deleting':
    case 'Deleted':
      return true;
    default:
      return status.generation >= generation;
  }
}

/**
 * Runs one call under a signal of its own that follows `signal`: the SDK leaves its abort listener on the signal it
 * is given, so handing it the long-lived one would pile up a listener per poll.
 */
async function abortable<T>(signal: AbortSignal, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const own = new AbortController();
  const follow = () => own.abort(signal.reason);
  signal.addEventListener('abort', follow, { once: true });
  try {
    return await call(own.signal);
  } finally {
    signal.removeEventListener('abort', follow);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      // `reason` is typed any: it is the caller's abort reason, an AbortError DOMException when none was given.
      reject(signal!.reason as Error);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}
