// Long-running activities tell their workflow what is happening with the `progress` signal, so that status
// queries, search attributes and the Web UI show download progress and waiting reasons while a step runs.
import { Context } from '@temporalio/activity';
import type { StepProgress } from '../../workflows/contract/index.js';

/** Sends one progress report to the workflow that runs the current activity. */
export type ProgressSink = (workflow: { workflowId: string; runId?: string }, progress: StepProgress) => Promise<void>;

/**
 * Heartbeats every report (so a retry resumes with the last one) and forwards it to the workflow, at most once per
 * `minIntervalMs` unless the state changes; a failed send never fails the activity.
 */
export class ProgressReporter {
  private lastSentAt = 0;
  private lastState: string | undefined;

  constructor(
    private readonly sink: ProgressSink | undefined,
    private readonly minIntervalMs = 5_000,
    private readonly now: () => number = Date.now,
  ) {}

  async report(progress: StepProgress): Promise<void> {
    const ctx = Context.current();
    ctx.heartbeat(progress);
    if (!this.sink) return;
    const t = this.now();
    const changed = progress.state !== this.lastState;
    if (!changed && t - this.lastSentAt < this.minIntervalMs) return;
    this.lastSentAt = t;
    this.lastState = progress.state;
    const execution = ctx.info.workflowExecution;
    if (!execution) return;
    await this.sink({ workflowId: execution.workflowId, runId: execution.runId }, progress).catch((err: unknown) => {
      ctx.log.warn('progress report not delivered', { error: String(err) });
    });
  }
}
