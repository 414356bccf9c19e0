// Teardown: everything the model owns deleted (the volume kept when its policy says so), retried until nothing is left.
import { ActivityFailure, sleep } from '@temporalio/workflow';
import { backoffMs, type Activities } from '../activity-options.js';
import type { TeardownResult } from '../contract/index.js';
import { classifyFailure, type Budgets } from '../status/failure.js';
import { finishTeardown, retryingStep } from '../status/transitions.js';
import { now, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const teardownRow: StepRow = { phase: 'Deleting', progress: ['teardown'] };

/** Deletes what the model owns; a failure is shown and retried after a backoff, never given up on. */
export async function tearDown(
  ctx: StepContext,
  acts: Activities,
  budgets: Budgets,
): Promise<{ result: TeardownResult; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await acts.teardown.tearDown({ model: ctx.desired });
      ctx.set(finishTeardown(ctx.status, result, attempt, now()));
      return { result, attempts: attempt };
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      const failed = classifyFailure(err, 'teardown', budgets);
      ctx.set(retryingStep(ctx.status, 'teardown', failed, attempt, ctx.status.generation, now()));
      await sleep(backoffMs(attempt, ctx.options));
    }
  }
}
