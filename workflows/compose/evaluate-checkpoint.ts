// The checkpoint-evaluation workflow: serve a checkpoint, wait until it is Ready, evaluate it with an activity of
// the caller's, and delete the model whatever the evaluation did. Runs on the caller's worker (re-export it from
// your workflows file); ServeModelWorkflow runs on Ferry's.
import { proxyActivities, type RetryPolicy } from '@temporalio/workflow';
import type { ModelRef } from '../contract/index.js';
import { modelRefOf } from '../contract/index.js';
import { specOf, type ServeAsChildOptions } from './serve-as-child.js';
import { withServedModel } from './with-served-model.js';

/** What the evaluation activity is called with. */
export interface EvaluationTarget {
  model: ModelRef;
  endpoint: string;
  servedModelName: string;
}

export interface EvaluateCheckpointInput {
  /** The ServedModel document of the checkpoint to serve. */
  model: unknown;
  /** The caller's activity that evaluates the served model; it gets an `EvaluationTarget` and returns a result. */
  evaluation: {
    activity: string;
    /** The task queue of the worker that hosts the activity; default the calling workflow's. */
    taskQueue?: string;
    /** Default 1 hour. */
    startToCloseTimeoutMs?: number;
    retry?: RetryPolicy;
  };
  serve?: ServeAsChildOptions;
}

export interface EvaluateCheckpointResult {
  endpoint: string;
  /** What the evaluation activity returned. */
  evaluation: unknown;
}

/** serve → Ready → evaluate → delete; the deletion happens when the evaluation succeeds, fails, or is cancelled. */
export async function evaluateCheckpointWorkflow(input: EvaluateCheckpointInput): Promise<EvaluateCheckpointResult> {
  const { evaluation } = input;
  const model = modelRefOf(specOf(input.model));
  const activities = proxyActivities<Record<string, (target: EvaluationTarget) => Promise<unknown>>>({
    ...(evaluation.taskQueue ? { taskQueue: evaluation.taskQueue } : {}),
    startToCloseTimeout: evaluation.startToCloseTimeoutMs ?? 3_600_000,
    ...(evaluation.retry ? { retry: evaluation.retry } : {}),
  });
  return await withServedModel(
    input.model,
    async ({ endpoint, servedModelName }) => {
      const result = await activities[evaluation.activity]!({ model, endpoint, servedModelName });
      return { endpoint, evaluation: result };
    },
    input.serve,
  );
}
