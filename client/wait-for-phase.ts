// Waiting for a model: Ready after serve or update, Deleted after delete, any phase for watch. The wait itself is
// one `awaitPhase` update the workflow answers the moment the phase is reached; status queries alongside it (one
// per poll interval) only feed progress to `onStatus`, and decide the wait when the update cannot be used (a worker
// from before it, or none at all).
import { isGrpcServiceError, ServiceError, type Client } from '@temporalio/client';
import {
  awaitPhaseUpdate,
  type ModelRef,
  type ModelStatus,
  type Phase,
  waitOutcome,
} from '../workflows/contract/index.js';
import {
  ModelDeletedError,
  ModelFailedError,
  ModelNotFoundError,
  ModelWorkflowClosedError,
  NoWorkerError,
  WaitTimeoutError,
} from './errors.js';
import { getModelStatus, modelHandle } from './model-status.js';

/** The pause before the update is asked again after it returned early or failed; it doubles with each failure. */
const UPDATE_RETRY_MS = 200;
const MAX_UPDATE_RETRY_MS = 10_000;
/** Between status reads that failed for a passing reason, doubling up to the poll interval. */
const FIRST_READ_RETRY_MS = 250;

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
  /**
   * Called once per streak of status reads that failed for a reason that passes (a worker restarting, Temporal
   * restarting or overloaded); the wait goes on, reading again with a backoff.
   */
  onRetry?: (error: Error) => void;
  /** Default 1 s. */
  pollIntervalMs?: number;
  /** Stops the wait; it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Resolves with the status once the model is in one of `phases` at the generation waited for. Rejects with
 * `ModelFailedError` when it fails instead (unless Failed is one of `phases`), `ModelDeletedError` when it is
 * deleted instead, `WaitTimeoutError` (or `NoWorkerError`, if no worker answered at the end) when time runs out.
 * A worker or Temporal restarting does not end the wait: the update held in the workflow survives both, and reads
 * that fail meanwhile are retried (`onRetry`).
 */
export async function waitForPhase(
  client: Client,
  ref: ModelRef,
  phases: readonly Phase[],
  options: WaitOptions,
): Promise<ModelStatus> {
  const { timeoutMs, onStatus, onNoWorker, onRetry, pollIntervalMs = 1_000, signal } = options;
  const deadline = Date.now() + timeoutMs;
  let target = options.generation;
  let last: ModelStatus | undefined;
  let lastJson: string | undefined;
  let noWorker: NoWorkerError | undefined;
  /** The latest read that failed for a passing reason, and how long to wait before the next read. */
  let unreadable: Error | undefined;
  let readRetryMs = FIRST_READ_RETRY_MS;

  // The update in flight, resolving with a status (or undefined when it could not be used); aborted on return.
  const updates = new AbortController();
  let held: Promise<ModelStatus | undefined> | undefined;
  let updateFailures = 0;
  /** An update that returned early (its run closing) or failed is asked again no sooner than this. */
  let nextUpdateAt = 0;
  let next: ModelStatus | undefined;
  try {
    for (;;) {
      signal?.throwIfAborted();
      let status: ModelStatus | undefined = next;
      next = undefined;
      if (!status) {
        try {
          status = signal
            ? await abortable(signal, (s) => client.withAbortSignal(s, () => getModelStatus(client, ref)))
            : await getModelStatus(client, ref);
          [noWorker, unreadable, readRetryMs] = [undefined, undefined, FIRST_READ_RETRY_MS];
        } catch (err) {
          signal?.throwIfAborted();
          if (err instanceof NoWorkerError) {
            if (!noWorker) onNoWorker?.(err);
            noWorker = err;
          } else if (isPassing(err)) {
            if (!unreadable) onRetry?.(err);
            unreadable = err;
          } else {
            throw err;
          }
        }
      }
      if (status) {
        const json = JSON.stringify(status);
        if (json !== lastJson) onStatus?.(status);
        [last, lastJson] = [status, json];
        target ??= status.generation;
        const outcome = waitOutcome(status, phases, target);
        if (outcome === 'done') return status;
        if (outcome === 'failed') throw new ModelFailedError(ref, status.lastError, status);
        if (outcome === 'deleted') {
          throw new ModelDeletedError(
            ref,
            status.phase as 'Deleting' | 'Deleted',
            `it will not become ${phases.join(' or ')}`,
          );
        }
        if (!held && isLive(status) && Date.now() >= nextUpdateAt) {
          held = holdUpdate(client, ref, { phases: [...phases], generation: target }, updates.signal);
        }
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        if (noWorker) throw noWorker;
        const hint = unreadable ? `the status could not be read lately: ${unreadable.message}` : undefined;
        throw new WaitTimeoutError(ref, timeoutMs, `become ${phases.join(' or ')}`, last, hint);
      }
      let pause = pollIntervalMs;
      if (unreadable || noWorker) {
        pause = readRetryMs;
        readRetryMs = Math.min(readRetryMs * 2, pollIntervalMs);
      }
      // The update is asked again only after a status was read this round (it needs the generation, and a live run).
      const canHold = !held && status !== undefined && isLive(status);
      const retryIn = canHold ? Math.max(0, nextUpdateAt - Date.now()) : Infinity;
      const answered = await sleepUnless(Math.min(pause, remaining, retryIn), held, signal);
      if (answered !== 'slept') {
        // Decided, or let go by a run continuing as new (the next run is asked shortly), or failed (a worker from
        // before the update, Temporal restarting: asked again later, less and less often).
        held = undefined;
        next = answered;
        updateFailures = answered ? 0 : updateFailures + 1;
        nextUpdateAt = Date.now() + Math.min(UPDATE_RETRY_MS * 2 ** updateFailures, MAX_UPDATE_RETRY_MS);
      }
    }
  } finally {
    updates.abort();
  }
}

/**
 * Whether a failed status read is worth repeating: Temporal or a worker unreachable, overloaded or restarting (the
 * server's `Failed to query Workflow`, deadlines, UNAVAILABLE). Not: a model that does not exist or whose workflow
 * ended for good, and credentials or requests the server refuses.
 */
export function isPassing(err: unknown): err is Error {
  if (err instanceof ModelNotFoundError || err instanceof ModelWorkflowClosedError) return false;
  let serverSide = false;
  for (let e = err; e instanceof Error; e = e.cause) {
    if (e instanceof ServiceError || isGrpcServiceError(e)) serverSide = true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && REFUSED_CODES.has(code)) return false;
  }
  return serverSide;
}

/** gRPC codes that no retry changes: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNIMPLEMENTED, UNAUTHENTICATED. */
const REFUSED_CODES = new Set([3, 5, 7, 12, 16]);

/** A running workflow answers updates; a Deleted status comes from a completed one. */
function isLive(status: ModelStatus): boolean {
  return status.phase !== 'Deleted';
}

/** The `awaitPhase` update: its status, or undefined when it failed (an older worker, the run closed, an abort). */
async function holdUpdate(
  client: Client,
  ref: ModelRef,
  input: { phases: Phase[]; generation: number },
  signal: AbortSignal,
): Promise<ModelStatus | undefined> {
  try {
    // Under a signal of its own each time: the wait may ask again many times (a Failed-then-retried model, a run that
    // continues as new), and the SDK's listeners would pile up on one long-lived signal.
    return await abortable(signal, (own) =>
      client.withAbortSignal(own, () => modelHandle(client, ref).executeUpdate(awaitPhaseUpdate, { args: [input] })),
    );
  } catch {
    return undefined;
  }
}

/** Sleeps `ms`, or less when `held` resolves first (with its answer); rejects when `signal` aborts. */
function sleepUnless(
  ms: number,
  held: Promise<ModelStatus | undefined> | undefined,
  signal?: AbortSignal,
): Promise<ModelStatus | undefined | 'slept'> {
  if (!held) return sleep(ms, signal).then(() => 'slept' as const);
  const stop = new AbortController();
  const follow = () => stop.abort(signal?.reason);
  signal?.addEventListener('abort', follow, { once: true });
  return Promise.race([sleep(ms, stop.signal).then(() => 'slept' as const), held]).finally(() => {
    signal?.removeEventListener('abort', follow);
    stop.abort();
  });
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
