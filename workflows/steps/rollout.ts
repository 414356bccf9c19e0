// The rollout: the engine's Deployment (and Service) applied for the spec, then its rollout awaited to the end.
import type { Activities } from '../activity-options.js';
import type { RevisionShare, RolloutResult, ScalingPolicy, ServedModel, Slot } from '../contract/index.js';
import { skipStep } from '../status/timeline.js';
import { markReady } from '../status/transitions.js';
import { admissionLimit } from './baseline.js';
import { now, slotOf, type ModelObjects, type StepContext, type World } from './context.js';
import { engineScale, scalingStatus } from './scale.js';
import type { StepRow } from './table.js';

export const rolloutRow: StepRow = {
  phase: 'engine',
  condition: { type: 'RolledOut', reason: 'RolledOut', message: 'the Deployment rolled out the current spec' },
  progress: ['rollout'],
  budget: 'startup',
};

/** Applies the engine (starting at `engine`'s admission limit, replica count and scaling policy) and waits for its rollout. */
export async function rollOut(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  engine: { admissionLimit?: number; replicas?: number; scaling?: ScalingPolicy },
  generation: number,
): Promise<RolloutResult> {
  const spec = objects.model;
  // Set before the call: a cancelled applyEngine may still have created the Deployment.
  ctx.world.engineApplied = true;
  const revision = revisionName(ctx.world);
  const shares = frontShares(spec, revision, objects);
  const rollout = await ctx.step(
    'rollout',
    generation,
    async () => {
      const applied = await acts.short.applyEngine({ ...objects, ...engine, ...shares });
      return await acts.startup.awaitRollout({ model: spec, generation: applied.generation, ...slotOf(objects) });
    },
    (r) => `revision ${r.generation}: ${r.readyReplicas} ready`,
  );
  ctx.world.engineGeneration = rollout.generation;
  ctx.set({ ...ctx.status, revision });
  return rollout;
}

/** The newest revision's name, `r<n>` (docs/design/rollout.md, section 1). */
const revisionName = (world: World): string => `r${world.revision ?? 1}`;

/** The revision the engine was last rolled out with (the newest, before the first rollout that records it). */
export const servingRevision = (ctx: StepContext): string => ctx.status.revision ?? revisionName(ctx.world);

/**
 * With `spec.front`: the revisions it sends requests to, for every activity that applies or repairs it: the current
 * one alone, in its slot.
 */
export function frontShares(spec: ServedModel, revision: string, at: { slot?: Slot }): { shares?: RevisionShare[] } {
  return spec.spec.front ? { shares: [{ revision, slot: at.slot ?? 'a', weight: 100 }] } : {};
}

/** Ready with 0 replicas: no engine to check, and none holds an adapter (what status said of them is of replicas gone). */
export function readyWithoutEngine(ctx: StepContext, generation: number): void {
  if (ctx.status.adapters) ctx.set({ ...ctx.status, adapters: undefined });
  ctx.set(skipStep(ctx.status, 'startup', generation, now(), 'replicas is 0'));
  ctx.set(markReady(ctx.status, { generation, readyReplicas: 0 }, now()));
}

/**
 * A model that scales on its measured capacity gets its target once the baseline step measured it: the Deployment
 * is applied again with the policy (its pods unchanged, no rollout).
 */
export async function applyMeasuredTarget(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  applied: ReturnType<typeof engineScale>,
): Promise<void> {
  const spec = objects.model;
  ctx.set(scalingStatus(ctx.status, spec, ctx.world));
  const scale = engineScale(ctx.status, spec, ctx.world);
  if (JSON.stringify(scale) === JSON.stringify(applied)) return;
  await ctx.step('rollout', ctx.status.generation, () =>
    acts.short.applyEngine({
      ...objects,
      ...admissionLimit(ctx.status, spec),
      ...scale,
      ...frontShares(spec, servingRevision(ctx), objects),
    }),
  );
}
