// `spec.scaling.schedule` (docs/design/scaling.md): the fewest replicas by time window. The workflow keeps one timer,
// until the floor next changes; each change is applied when the model is idle — the Deployment applied again with
// the policy's new minReplicas (no rollout), raised to the floor when below it. A lower floor leaves the count where
// it is: the autoscaler brings it down as the load allows.
import { ActivityFailure, isCancellation, log } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import type { ModelStatus, ScheduledFloor, ScheduleStatus, ServedModel } from '../contract/index.js';
import { endStep } from '../status/timeline.js';
import { admissionLimit } from './baseline.js';
import { now, slotOf, type StepContext, type World } from './context.js';
import { frontShares, servingRevision } from './rollout.js';
import { engineReplicas, engineScale, scalingStatus, withRecentScaleEntries } from './scale.js';

/** What status shows of `floor`. */
export function scheduleStatus(floor: ScheduledFloor): ScheduleStatus {
  const { next } = floor;
  return {
    minReplicas: floor.minReplicas,
    ...(next && next.minReplicas !== floor.minReplicas
      ? { nextChangeAt: new Date(next.at).toISOString(), nextMinReplicas: next.minReplicas }
      : {}),
  };
}

/** `status.scaling` with the schedule's floor and next change (removed when `spec` has no schedule). */
export function withSchedule(status: ModelStatus, spec: ServedModel, world: World, floor: ScheduledFloor): ModelStatus {
  const next = scalingStatus(status, spec, world);
  if (!next.scaling) return next;
  const { schedule: _dropped, ...scaling } = next.scaling;
  if (!spec.spec.scaling?.schedule) return _dropped ? { ...next, scaling } : next;
  return { ...next, scaling: { ...scaling, schedule: scheduleStatus(floor) } };
}

/**
 * Puts the floor `scheduledMin` in force (unset: the spec's minReplicas alone): the engine applied again with it, a
 * closed `scale` entry when that raised the count. False when the apply failed (nothing changed; tried again later).
 */
export async function applyFloor(
  ctx: StepContext,
  acts: Activities,
  scheduledMin: number | undefined,
  floor: ScheduledFloor,
): Promise<boolean> {
  const spec = ctx.desired;
  const { world } = ctx;
  const from = engineReplicas(spec, world);
  const next: World = { ...world, scheduledMin };
  const to = engineReplicas(spec, next);
  try {
    const { generation } = await acts.short.applyEngine({
      model: spec,
      rootUid: world.rootUid!,
      sourceHash: world.sourceHash!,
      ...admissionLimit(ctx.status, spec),
      ...engineScale(ctx.status, spec, next),
      ...frontShares(spec, servingRevision(ctx), world),
      ...slotOf(world),
    });
    world.engineGeneration = generation;
  } catch (err) {
    if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
    log.warn('applying the schedule failed', { error: String(err.cause ?? err), scheduledMin });
    return false;
  }
  world.scheduledMin = scheduledMin;
  if (to !== from) world.scaledReplicas = to;
  let status = withSchedule(ctx.status, spec, world, floor);
  if (to !== from) {
    const detail = `${from} → ${to} replicas: the schedule asks for at least ${floor.minReplicas}`;
    status = withRecentScaleEntries(endStep(status, 'scale', 'Succeeded', now(), detail));
  }
  ctx.set(status);
  return true;
}
