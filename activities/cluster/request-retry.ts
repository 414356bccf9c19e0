// Per-request retries of Kubernetes API calls: a transient failure (throttling, a server error, a dropped or hung
// connection) is ridden out here, within a few seconds, instead of failing the whole activity attempt. What is still
// failing when the time bound runs out, and every failure no repeat fixes, reaches `kubeFailure` as before.
import { ApplicationFailure } from '@temporalio/common';
import { kubeFailure } from './errors.js';

/** How one call is retried. */
export interface RetryPolicy {
  /** The first backoff's ceiling; it doubles with each retry (full jitter: the delay is uniform below it). */
  initialDelayMs: number;
  /** The backoff ceiling's cap. */
  maxDelayMs: number;
  /** A server's Retry-After is honoured up to this long. */
  maxRetryAfterMs: number;
  /** The time one call may take, retries included: no retry starts later (an attempt under way may end later). */
  budgetMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  initialDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 10_000,
  budgetMs: 30_000,
};

/** One retry, as `onRetry` hears of it. */
export interface RetryNote {
  /** What was being done, e.g. `reading Deployment ns/name`. */
  doing: string;
  /** The failure as Ferry names it: `KubernetesHttp429`, `KubernetesUnreachable`, … */
  reason: string;
  /** What was being done and the API's message. */
  message: string;
  /** The attempt that failed (1 for the first). */
  attempt: number;
  /** How long until the next attempt. */
  delayMs: number;
}

interface ErrorLike {
  code?: unknown;
  message?: unknown;
  headers?: Record<string, string>;
  /** Set by Ferry's HTTP library: whether the whole request had left before the failure. */
  sent?: unknown;
  cause?: unknown;
}

const TRANSIENT_STATUS = new Set([429, 500, 502, 503, 504]);
/** Answers the API server gives before it acts on a request: the request did not take effect. */
const REFUSED_STATUS = new Set([429, 503]);
/** Network errors that happen before a connection exists, so before anything was sent. */
const UNCONNECTED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const NETWORK_CODES = new Set([
  ...UNCONNECTED_CODES,
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ECONNABORTED',
  'ESOCKETTIMEDOUT',
  'UND_ERR_SOCKET',
  'ERR_STREAM_PREMATURE_CLOSE',
]);
const NETWORK_MESSAGE = /socket hang up|request timed? ?out|network timeout|ECONNRESET|ECONNREFUSED|ETIMEDOUT/i;

/** The HTTP status of a failed call, or undefined when no answer came. */
export function statusOf(err: unknown): number | undefined {
  const code = (err as ErrorLike | undefined)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

function networkCode(err: unknown): string | undefined {
  for (let e = err as ErrorLike | undefined, depth = 0; e && depth < 3; e = e.cause as ErrorLike, depth++) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
}

function isNetworkError(err: unknown): boolean {
  if (statusOf(err) !== undefined) return false;
  const code = networkCode(err);
  if (code !== undefined && NETWORK_CODES.has(code)) return true;
  const message = (err as ErrorLike | undefined)?.message;
  return typeof message === 'string' && NETWORK_MESSAGE.test(message);
}

/**
 * Whether a repeat may succeed: network errors (reset, refused, timed out, hung up) and 429, 500, 502, 503, 504.
 * Not 400, 403, 404, 409, 410, 422: the API server meant them.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof ApplicationFailure) return false;
  const status = statusOf(err);
  return status !== undefined ? TRANSIENT_STATUS.has(status) : isNetworkError(err);
}

/** Whether a failed request certainly did not take effect: refused by the server (429, 503) or never sent. */
export function certainlyNotApplied(err: unknown): boolean {
  const status = statusOf(err);
  if (status !== undefined) return REFUSED_STATUS.has(status);
  if (!isNetworkError(err)) return false;
  const code = networkCode(err);
  return (err as ErrorLike).sent === false || (code !== undefined && UNCONNECTED_CODES.has(code));
}

/** A transient failure after which a write may or may not have happened: a reset or timeout after sending, a 5xx. */
export const outcomeUnknown = (err: unknown): boolean => isTransient(err) && !certainlyNotApplied(err);

function retryAfterMs(err: unknown): number | undefined {
  const headers = (err as ErrorLike | undefined)?.headers ?? {};
  const raw = headers['retry-after'] ?? headers['Retry-After'];
  const seconds = raw === undefined ? NaN : Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * The pause before retry number `retry` (1 for the first): uniform in [0, min(max, initial·2^(retry-1))), but never
 * shorter than the server's Retry-After (capped at `maxRetryAfterMs`).
 */
export function retryDelayMs(
  retry: number,
  err: unknown,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, retry - 1));
  const jittered = Math.floor(random() * ceiling);
  const asked = retryAfterMs(err);
  return asked === undefined ? jittered : Math.max(jittered, Math.min(asked, policy.maxRetryAfterMs));
}

export interface RetryOptions {
  policy?: RetryPolicy;
  /** Which failures are retried; `isTransient` by default. */
  retryable?: (err: unknown) => boolean;
  onRetry?: (note: RetryNote) => void;
  /** Stops retrying (the last failure is thrown) when it aborts, e.g. the activity's cancellation. */
  signal?: AbortSignal;
  now?: () => number;
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done);
  });

/**
 * Calls `attempt` until it succeeds, fails in a way `retryable` refuses, or the policy's budget is spent (the last
 * retry is made when it ends); then throws its last failure unchanged (callers turn it into one with `kubeFailure`).
 */
export async function withRetries<T>(
  doing: string,
  attempt: (n: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  const now = options.now ?? Date.now;
  const retryable = options.retryable ?? isTransient;
  const start = now();
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!retryable(err) || options.signal?.aborted) throw err;
      const left = policy.budgetMs - (now() - start);
      if (left <= 0) throw err;
      const asked = retryAfterMs(err);
      // The last retry comes when the budget ends, unless the server asked for a longer pause than is left.
      if (asked !== undefined && Math.min(asked, policy.maxRetryAfterMs) > left) throw err;
      const delayMs = Math.min(retryDelayMs(n, err, policy, options.random), left);
      const named = kubeFailure(err, doing);
      try {
        options.onRetry?.({
          doing,
          reason: named.type ?? 'KubernetesUnreachable',
          message: named.message,
          attempt: n,
          delayMs,
        });
      } catch {
        // Telling of a retry never changes the call.
      }
      await (options.sleep ?? sleep)(delayMs, options.signal);
      if (options.signal?.aborted) throw err;
    }
  }
}
