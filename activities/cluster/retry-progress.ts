// A Kubernetes request being retried shows in the model's status within seconds, as the running step's waiting reason
// (`KubernetesHttp429`, `KubernetesUnreachable`, … with what was being done), instead of only once the activity
// attempt has failed. Sent as a `progress` signal without a heartbeat: heartbeat details stay what a retried attempt
// resumes from (awaitPuller's last progress). The step's next report of its own replaces it.
import { Context } from '@temporalio/activity';
import type { FerryActivities, StepProgress } from '../../workflows/contract/index.js';
import type { ProgressSink } from './progress.js';
import type { RetryNote } from './request-retry.js';

/**
 * The progress step that describes each activity's step while it runs (`progress` in workflows/steps.ts); the
 * looks (lookAtModel, readStatus) take no progress reports.
 */
const PROGRESS_STEP: Partial<Record<keyof FerryActivities, StepProgress['step']>> = {
  claimName: 'claim',
  applyStorage: 'storage',
  startPuller: 'download',
  awaitPuller: 'download',
  releaseVolume: 'release',
  applyEngine: 'rollout',
  awaitRollout: 'rollout',
  awaitHealth: 'startup',
  scaleEngine: 'stop',
  fetchAdapters: 'adapters',
  syncAdapters: 'adapters',
  tearDown: 'teardown',
};

/** How often one activity attempt reports retries at most. */
const RETRY_REPORT_INTERVAL_MS = 2_000;

/**
 * An `onRetry` for `Cluster` that logs each retry of a request made inside an activity and reports it to the
 * activity's workflow through `sink`, at most once per `minIntervalMs` per activity attempt. Outside an activity
 * (the worker's watch, Kubernetes Events) it does nothing.
 */
export function retryProgress(
  sink: ProgressSink | undefined,
  minIntervalMs = RETRY_REPORT_INTERVAL_MS,
  now: () => number = Date.now,
): (note: RetryNote) => void {
  const lastSent = new WeakMap<Context, number>();
  return (note) => {
    let ctx: Context;
    try {
      ctx = Context.current();
    } catch {
      return;
    }
    ctx.log.info('retrying a Kubernetes request', {
      reason: note.reason,
      error: note.message,
      attempt: note.attempt,
      retryInMs: note.delayMs,
    });
    const step = PROGRESS_STEP[ctx.info.activityType as keyof FerryActivities];
    const execution = ctx.info.workflowExecution;
    if (!sink || !step || !execution) return;
    const t = now();
    const last = lastSent.get(ctx);
    if (last !== undefined && t - last < minIntervalMs) return;
    lastSent.set(ctx, t);
    const progress: StepProgress = {
      step,
      state: note.reason,
      message: `${note.message} (retry ${note.attempt}, next in ${(note.delayMs / 1000).toFixed(1)} s)`,
    };
    sink({ workflowId: execution.workflowId, runId: execution.runId }, progress).catch((err: unknown) => {
      ctx.log.warn('progress report not delivered', { error: String(err) });
    });
  };
}

/**
 * At the start of an activity's second or later attempt (Temporal retried it: its worker was lost, or the attempt
 * failed), tells its workflow so, as the step's waiting reason `Retrying`: until the new attempt's first report,
 * status says the step is being tried again instead of showing what the lost attempt last saw.
 */
export function reportRetriedAttempt(sink: ProgressSink, ctx: Context): void {
  const { attempt, activityType, workflowExecution: execution } = ctx.info;
  const step = PROGRESS_STEP[activityType as keyof FerryActivities];
  if (attempt < 2 || !step || !execution) return;
  const progress: StepProgress = {
    step,
    state: 'Retrying',
    message: `attempt ${attempt} of ${activityType}: the previous attempt did not finish (its worker was lost, or it failed)`,
  };
  sink({ workflowId: execution.workflowId, runId: execution.runId }, progress).catch((err: unknown) => {
    ctx.log.warn('progress report not delivered', { error: String(err) });
  });
}
