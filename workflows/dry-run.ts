// `ferry serve|update|apply --dry-run=server`: one short workflow on the task queue of the model's cluster, so that
// the worker of that cluster (its parser, its settings, its credentials) answers, and the answer is recorded in
// Temporal like every other request. It runs one activity and owns nothing: no model, no patch.
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { DryRunInput, DryRunResult, FerryActivities } from './contract/index.js';

const { dryRunModel } = proxyActivities<FerryActivities>({
  // A handful of requests to the API server, each with its own retries (activities/cluster/request-retry.ts, 30 s at
  // most): two attempts fit in the client's execution timeout, so the activity's own failure is what the caller sees.
  startToCloseTimeout: 40_000,
  retry: { initialInterval: 1_000, maximumAttempts: 2 },
});

/** The worker's and the API server's answer to `input.document`; nothing is created. */
export async function dryRunModelWorkflow(input: DryRunInput): Promise<DryRunResult> {
  try {
    return await dryRunModel(input);
  } catch (err) {
    // The activity's own failure (type and message), not the wrapper that says an activity failed.
    throw err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : err;
  }
}
