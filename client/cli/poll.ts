// The loop behind `status -w` and `list -w`: read again on an interval until Ctrl-C or --timeout. Neither the status
// query nor visibility can be subscribed to, so a watch polls; a read that fails for a passing reason (Temporal or a
// worker restarting, overloaded) is tried again less and less often, and said once per streak.
import { NoWorkerError } from '../errors.js';
import { isPassing } from '../wait-for-phase.js';

export interface PollOptions {
  /** Between reads while they succeed. */
  intervalMs: number;
  /** The longest pause between failing reads (it doubles from `intervalMs`). */
  maxIntervalMs: number;
  /** When to stop (`Date.now()` milliseconds; `Infinity`: until `signal`). */
  deadline: number;
  /** Ctrl-C: the poll rejects with its reason. */
  signal: AbortSignal;
  /** Told once per streak of failing reads, with the pause before the next. */
  onRetry: (error: Error, retryInMs: number) => void;
}

/**
 * Calls `read` every `intervalMs` and hands each result to `onValue`, until the deadline (resolves) or the signal
 * (rejects). A read that fails for a reason no retry changes (a model that does not exist, refused credentials)
 * ends the poll with its error.
 */
export async function poll<T>(
  read: () => Promise<T>,
  onValue: (value: T) => void,
  options: PollOptions,
): Promise<void> {
  const { intervalMs, maxIntervalMs, deadline, signal, onRetry } = options;
  let pause = intervalMs;
  let failing = false;
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return;
    await sleep(Math.min(pause, remaining), signal);
    if (Date.now() >= deadline) return;
    let value: T;
    try {
      value = await untilAborted(read(), signal);
    } catch (err) {
      signal.throwIfAborted();
      if (!(err instanceof NoWorkerError) && !isPassing(err)) throw err;
      pause = Math.min(pause * 2, maxIntervalMs);
      if (!failing) onRetry(err, pause);
      failing = true;
      continue;
    }
    [pause, failing] = [intervalMs, false];
    onValue(value);
  }
}

/** `promise`, or the signal's reason once it aborts (the read itself is left to finish or fail unseen). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', abort, { once: true });
    void promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', abort);
      resolve();
    }, ms);
    function abort() {
      clearTimeout(timer);
      reject(signal.reason as Error);
    }
    signal.addEventListener('abort', abort, { once: true });
  });
}
