// How Kubernetes API errors become activity failures: what a retry cannot fix fails the step at once with the API's
// own message; what a retry can fix (conflicts, throttling, server errors, network) is retried, honouring Retry-After.
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE, failure, type FailureType } from '../../workflows/contract/index.js';

/** The parts of a client-node `ApiException` (or a network error) that decide what happens next. */
interface ApiErrorLike {
  code?: number;
  body?: unknown;
  headers?: Record<string, string>;
  message?: string;
}

/** The HTTP status of a failed Kubernetes call, or undefined for a network error. */
function httpStatus(err: unknown): number | undefined {
  const code = (err as ApiErrorLike | undefined)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

export const isNotFound = (err: unknown): boolean => httpStatus(err) === 404;

/** The API server's own explanation (`Status.message`), else the error's message. */
function apiMessage(err: unknown): string {
  const e = err as ApiErrorLike | undefined;
  const body = e?.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      if (body.trim()) return body.trim().slice(0, 500);
    }
  } else if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') {
    return (body as { message: string }).message;
  }
  return e?.message ?? String(err);
}

function retryAfterMs(err: unknown): number | undefined {
  const headers = (err as ApiErrorLike | undefined)?.headers ?? {};
  const raw = headers['retry-after'] ?? headers['Retry-After'];
  const seconds = raw === undefined ? NaN : Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * A 422 that is the API server's own trouble, not the object's: allocating a Service's cluster IP or node port failed
 * for a reason of its own. Since Kubernetes 1.33 the cluster IP is an IPAddress object the API server creates through
 * its loopback client, so an API server shutting down answers `spec.clusterIPs: Invalid value: [""]: failed to
 * allocate IP: Post …/ipaddresses: … connection refused` (seen in a chaos run). The reasons a person must fix
 * (an address or port taken, outside the range, a full range) stay rejections.
 */
const ALLOCATION_FAILED = /failed to allocate/i;
const ALLOCATION_REFUSED = /already allocated|not in the valid range|range is full|not a valid ip|invalid ip/i;

function isTransientAllocationFailure(status: number | undefined, message: string): boolean {
  return status === 422 && ALLOCATION_FAILED.test(message) && !ALLOCATION_REFUSED.test(message);
}

/**
 * Turns a failed Kubernetes call into an `ApplicationFailure` that says what was being done.
 * 400/422 and 404 (when the object must exist) → `KubernetesRejected`, 403 → `Forbidden`: non-retryable.
 * 409, 429, 5xx and network errors → retryable, with Retry-After as the next retry's delay; so is a 422 that only
 * says the API server could not allocate a Service's address for a reason of its own (`KubernetesAllocationFailed`).
 */
export function kubeFailure(err: unknown, doing: string): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err;
  const status = httpStatus(err);
  const message = `${doing}: ${apiMessage(err)}`;
  if (status === 403) return failure(FAILURE.Forbidden, message, { status });
  if (isTransientAllocationFailure(status, message))
    return failure(FAILURE.KubernetesAllocationFailed, message, { status });
  if (status === 400 || status === 404 || status === 422 || status === 405 || status === 410) {
    return failure(FAILURE.KubernetesRejected, message, { status });
  }
  const type: FailureType = status === undefined ? FAILURE.KubernetesUnreachable : `KubernetesHttp${status}`;
  return failure(type, message, { status: status ?? null }, { nextRetryDelayMs: retryAfterMs(err) });
}
