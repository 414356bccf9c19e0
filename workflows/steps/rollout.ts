// The rollout: the engine's Deployment (and Service) applied for the spec, then its rollout awaited to the end.
import type { Activities } from '../activity-options.js';
import type { RolloutResult, ScalingPolicy } from '../contract/index.js';
import { skipStep } from '../status/timeline.js';
import { markReady } from '../status/transitions.js';
import { now, type ModelObjects, type StepContext } from './context.js';
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
  const rollout = await ctx.step(
    'rollout',
    generation,
    async () => {
      const applied = await acts.short.applyEngine({ ...objects, ...engine });
      return await acts.startup.awaitRollout({ model: spec, generation: applied.generation });
    },
    (r) => `revision ${r.generation}: ${r.readyReplicas} ready`,
  );
  ctx.world.engineGeneration = rollout.generation;
  return rollout;
}

/** Ready with 0 replicas: no engine to check, and none holds an adapter (what status said of them is of replicas gone). */
export function readyWithoutEngine(ctx: StepContext, generation: number): void {
  if (ctx.status.adapters) ctx.set({ ...ctx.status, adapters: undefined });
  ctx.set(skipStep(ctx.status, 'startup', generation, now(), 'replicas is 0'));
  ctx.set(markReady(ctx.status, { generation, readyReplicas: 0 }, now()));
}
