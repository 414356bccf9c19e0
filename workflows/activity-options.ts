// The workflow's knobs with their defaults, and the activities with the timeouts of each kind of step.
import { proxyActivities, type ActivityOptions, type RetryPolicy } from '@temporalio/workflow';
import {
  NON_RETRYABLE,
  parseDuration,
  type FerryActivities,
  type ServedModel,
  type ServeModelOptions,
} from './contract/index.js';

/**
 * How long any one short step (an apply, a delete, a look) may take. Like the long waits, short steps heartbeat
 * (the worker's keep-alive, from their third second on), so one whose worker was lost is retried within the heartbeat
 * timeout rather than after this.
 */
const SHORT_STEP_TIMEOUT_MS = 2 * 60_000;
const TEARDOWN_TIMEOUT_MS = 5 * 60_000;
/** A load measurement's bound in time (its bound in load is `spec.slo.maxConcurrency`). */
const MEASURE_TIMEOUT_MS = 10 * 60_000;

export interface ResolvedOptions {
  watchIntervalMs: number;
  safetyNetIntervalMs: number;
  continueAsNewAfterEvents: number;
  initialIntervalMs: number;
  maximumIntervalMs: number;
  maximumAttempts: number;
  timeoutMarginMs: number;
  heartbeatTimeoutMs: number;
}

export function resolveOptions(options: ServeModelOptions = {}): ResolvedOptions {
  return {
    watchIntervalMs: options.watchIntervalMs ?? 30_000,
    safetyNetIntervalMs: options.safetyNetIntervalMs ?? 30 * 60_000,
    continueAsNewAfterEvents: options.continueAsNewAfterEvents ?? 5_000,
    initialIntervalMs: options.retry?.initialIntervalMs ?? 1_000,
    maximumIntervalMs: options.retry?.maximumIntervalMs ?? 30_000,
    maximumAttempts: options.retry?.maximumAttempts ?? 10,
    timeoutMarginMs: options.timeoutMarginMs ?? 5 * 60_000,
    heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 10_000,
  };
}

/** The workflow's own backoff between attempts of a step (and of teardown). */
export function backoffMs(attempt: number, options: ResolvedOptions): number {
  return Math.min(options.initialIntervalMs * 2 ** Math.min(attempt - 1, 20), options.maximumIntervalMs);
}

export type Activities = ReturnType<typeof activitiesFor>;

/** The activities with the timeouts of each kind of step; long waits get their budget from the spec. */
export function activitiesFor(spec: ServedModel, options: ResolvedOptions) {
  const retry: RetryPolicy = {
    initialInterval: options.initialIntervalMs,
    backoffCoefficient: 2,
    maximumInterval: options.maximumIntervalMs,
    maximumAttempts: options.maximumAttempts,
    nonRetryableErrorTypes: [...NON_RETRYABLE],
  };
  // A long wait retries (a worker restart, a lost heartbeat) for as long as its budget lasts, and no longer.
  const { maximumAttempts: _bounded, ...unbounded } = retry;
  const longWait = (budgetMs: number): ActivityOptions => ({
    startToCloseTimeout: budgetMs,
    scheduleToCloseTimeout: budgetMs,
    heartbeatTimeout: options.heartbeatTimeoutMs,
    retry: unbounded,
  });
  return {
    short: proxyActivities<FerryActivities>({
      startToCloseTimeout: SHORT_STEP_TIMEOUT_MS,
      heartbeatTimeout: options.heartbeatTimeoutMs,
      retry,
    }),
    puller: proxyActivities<FerryActivities>(
      longWait(parseDuration(spec.spec.puller.deadline) + options.timeoutMarginMs),
    ),
    startup: proxyActivities<FerryActivities>(
      longWait(parseDuration(spec.spec.engine.startupTimeout) + options.timeoutMarginMs),
    ),
    measure: proxyActivities<FerryActivities>({
      startToCloseTimeout: MEASURE_TIMEOUT_MS,
      heartbeatTimeout: options.heartbeatTimeoutMs,
      retry,
    }),
    // One attempt per call: the workflow retries teardown itself, so each failure shows in status.
    teardown: proxyActivities<FerryActivities>({
      startToCloseTimeout: TEARDOWN_TIMEOUT_MS,
      heartbeatTimeout: options.heartbeatTimeoutMs,
      retry: { ...retry, maximumAttempts: 1 },
    }),
  };
}
