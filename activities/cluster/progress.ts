// Long-running activities tell their workflow what is happening with the `progress` signal, so that status
// queries, search attributes and the Web UI show download progress and waiting reasons while a step runs.
import { Context } from '@temporalio/activity';
import type { StepProgress } from '../../workflows/contract/index.js';

/** The details each running activity last heartbeated, so a keep-alive repeats them instead of clearing them. */
const lastDetails = new WeakMap<Context, unknown>();

/** How often a running activity says it is alive (the SDK sends at most one heartbeat per 80 % of the timeout). */
const KEEP_ALIVE_MS = 3_000;

/**
 * Heartbeats the current activity every `everyMs` while it runs, with the details it last reported (or those of
 * its previous attempt), so Temporal notices a lost worker within the heartbeat timeout even while a step waits on a
 * slow request. The first beat comes after `everyMs`: an activity that ends sooner sends none (heartbeats are billed).
 * Returns the stop.
 */
export function keepAlive(ctx: Context, everyMs = KEEP_ALIVE_MS): () => void {
  const timer = setInterval(() => {
    ctx.heartbeat(lastDetails.has(ctx) ? lastDetails.get(ctx) : ctx.info.heartbeatDetails);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

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
    lastDetails.set(ctx, progress);
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
