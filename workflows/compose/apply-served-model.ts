// Serving from a trigger in another team's workflow ("training finished → serve the checkpoint"): the model lives on
// after the workflow that asked for it, and a second delivery of the same event changes nothing.
import { proxyActivities } from '@temporalio/workflow';
import type { ApplyServedModelResult, ServeModelOptions, ServingActivities } from '../contract/index.js';

export interface ApplyServedModelOptions {
  /** The task queue of the worker that hosts `createServingActivities`; default the calling workflow's. */
  taskQueue?: string;
  /** Knobs for a model this call starts; production leaves them unset. */
  workflowOptions?: ServeModelOptions;
}

/**
 * Serves `document`, or makes it the running model's spec (the `applyServedModel` activity: one Update-with-Start).
 * Idempotent by content, so Temporal's activity retries and a duplicated trigger are harmless: the same document
 * again returns `changed: false` at the same generation. Returns once the workflow accepted the spec, not when Ready.
 */
export async function applyServedModel(
  document: unknown,
  options: ApplyServedModelOptions = {},
): Promise<ApplyServedModelResult> {
  const { applyServedModel: apply } = proxyActivities<ServingActivities>({
    ...(options.taskQueue ? { taskQueue: options.taskQueue } : {}),
    startToCloseTimeout: 2 * 60_000,
    retry: { maximumInterval: 30_000 },
  });
  return await apply({ document, ...(options.workflowOptions ? { workflowOptions: options.workflowOptions } : {}) });
}
