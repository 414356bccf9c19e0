// Failures of activities, classified into what status shows: a named reason, a message, and whether a retry helps.
import { ActivityFailure, ApplicationFailure, TemporalFailure, TimeoutFailure } from '@temporalio/common';
import { FAILURE, isRetryable, type Step } from '../contract/index.js';
import { stepRow } from '../steps/table.js';
import type { FailureInfo } from './transitions.js';

export interface ClassifiedFailure extends FailureInfo {
  /** A later attempt may succeed (the workflow retries the step); false ends the reconcile in phase Failed. */
  retryable: boolean;
}

/** The budgets a timeout is measured against, as written in the spec. */
export interface Budgets {
  pullerDeadline: string;
  startupTimeout: string;
}

/** Classifies what an activity call threw while running `step`. A timeout of a long wait is its budget running out. */
export function classifyFailure(err: unknown, step: Step, budgets: Budgets): ClassifiedFailure {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const reason = cause.type ?? FAILURE.ActivityFailed;
    const retryable = !cause.nonRetryable && isRetryable(reason);
    return { reason, message: cause.message, retryable };
  }
  if (cause instanceof TimeoutFailure) {
    const { budget } = stepRow(step);
    if (budget === 'puller') {
      return {
        reason: FAILURE.DeadlineExceeded,
        message: `the download did not finish within puller.deadline (${budgets.pullerDeadline})`,
        retryable: false,
      };
    }
    if (budget === 'startup') {
      const what = step === 'rollout' ? 'roll out' : 'answer /health';
      return {
        reason: FAILURE.StartupTimeout,
        message: `the engine did not ${what} within engine.startupTimeout (${budgets.startupTimeout})`,
        retryable: false,
      };
    }
    const activity = err instanceof ActivityFailure ? err.activityType : step;
    return {
      reason: FAILURE.Timeout,
      message: `${activity} timed out (${cause.timeoutType ?? 'unknown timeout'})`,
      retryable: true,
    };
  }
  if (cause instanceof TemporalFailure || cause instanceof Error) {
    return { reason: FAILURE.ActivityFailed, message: cause.message, retryable: true };
  }
  return { reason: FAILURE.ActivityFailed, message: String(cause), retryable: true };
}
