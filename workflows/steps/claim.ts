// The claim: every object the model needs is free or already ours (resuming our own objects of an earlier run).
import type { Activities } from '../activity-options.js';
import type { ServedModel } from '../contract/index.js';
import type { StepContext } from './context.js';
import type { StepRow } from './table.js';

export const claimRow: StepRow = {
  phase: 'Pending',
  condition: {
    type: 'NameClaimed',
    reason: 'Claimed',
    message: 'every object the model needs is free or already ours',
  },
  progress: ['claim'],
};

/** Claims the name (resuming our own objects); returns the hash of the source. */
export async function claim(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
): Promise<string> {
  const claimed = await ctx.step(
    'claim',
    generation,
    () => acts.short.claimName({ model: spec }),
    (r) => (r.resumed.length > 0 ? `resumed ${r.resumed.join(', ')}` : undefined),
  );
  ctx.world.rootUid = claimed.rootUid;
  if (claimed.resumed.some((object) => object.startsWith('Deployment/'))) ctx.world.engineApplied = true;
  ctx.set({ ...ctx.status, sourceHash: claimed.sourceHash });
  return claimed.sourceHash;
}
