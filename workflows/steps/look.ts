// A look at a Ready or Degraded model: by reference (the activity reads the spec), what drifted repaired and recorded,
// a lost root object or volume handed back for a whole reconcile, the adapters kept on engines that are new.
import { ActivityFailure, isCancellation, log } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import { modelRefOf, type LookResult } from '../contract/index.js';
import { adapterProblem } from '../status/adapters.js';
import { observe, recordRepair } from '../status/transitions.js';
import { keepAdapters } from './adapters.js';
import { admissionLimit } from './baseline.js';
import { now, slotOf, type StepContext } from './context.js';
import { frontShares, servingRevision } from './rollout.js';
import { engineScale } from './scale.js';
import type { StepRow } from './table.js';

/** A look put back what drifted (a deleted Service, a Deployment scaled by hand); recorded closed, with the detail. */
export const repairRow: StepRow = { phase: 'Ready', progress: [], span: true };

/** One look that reconciles; returns what was found lost. A failed look changes nothing: the model may be fine. */
export async function look(ctx: StepContext, acts: Activities, delayMs: number): Promise<LookResult['lost']> {
  const { rootUid, sourceHash, engineGeneration } = ctx.world;
  try {
    const result = await acts.short.lookAtModel({
      ref: modelRefOf(ctx.desired),
      generation: ctx.status.generation,
      rootUid: rootUid!,
      sourceHash: sourceHash!,
      ...(engineGeneration !== undefined ? { engineGeneration } : {}),
      ...admissionLimit(ctx.status, ctx.desired),
      ...engineScale(ctx.status, ctx.desired, ctx.world),
      ...frontShares(ctx.desired, servingRevision(ctx), ctx.world),
      ...slotOf(ctx.world),
      ...(delayMs > 0 ? { delayMs } : {}),
      ...(ctx.status.tenant !== undefined ? { tenant: ctx.status.tenant } : {}),
    });
    if (result.engineGeneration !== undefined) ctx.world.engineGeneration = result.engineGeneration;
    const at = now();
    if (result.lost) {
      const problem = { reason: result.lost.reason, message: result.lost.message };
      ctx.set(observe(ctx.status, { ...result, problem }, at));
      return result.lost;
    }
    if (!result.incarnations) {
      ctx.set(observe(recordRepair(ctx.status, result.repaired, at), result, at));
      return undefined;
    }
    ctx.set(recordRepair(ctx.status, result.repaired, at));
    await keepAdapters(ctx, acts, result);
    // An engine problem wins; else what the adapters lack keeps the model Degraded.
    const problem = result.problem ?? adapterProblem(ctx.status.adapters);
    ctx.set(observe(ctx.status, { ...result, ...(problem ? { problem } : {}) }, now()));
  } catch (err) {
    if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
    log.warn('lookAtModel failed', { error: String(err.cause ?? err) });
  }
  return undefined;
}

/** One look at a Ready or Degraded model in runs from before the watch reconciled: status only, nothing repaired. */
export async function readStatus(ctx: StepContext, acts: Activities): Promise<void> {
  try {
    ctx.set(observe(ctx.status, await acts.short.readStatus({ model: ctx.desired, ...slotOf(ctx.world) }), now()));
  } catch (err) {
    if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
    log.warn('readStatus failed', { error: String(err.cause ?? err) });
  }
}
