// Releasing the volume: the puller's Job and pod gone, so the ReadWriteOnce volume is free for the engine. Also how a
// stale puller (other weights, or a failed one) is abandoned.
import type { Activities } from '../activity-options.js';
import type { PendingPull, ServedModel, Slot } from '../contract/index.js';
import { slotOf, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const releaseRow: StepRow = {
  phase: 'Releasing',
  condition: {
    type: 'VolumeReleased',
    reason: 'Released',
    message: 'the puller is gone; the volume is free for the engine',
  },
  progress: ['release'],
};

/** Waits until the finished puller `jobName` is gone. */
export async function releaseVolume(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  pull: { jobName: string; sourceHash: string; slot?: Slot },
  generation: number,
): Promise<void> {
  await ctx.step('release', generation, () =>
    acts.short.releaseVolume({ model: spec, jobName: pull.jobName, sourceHash: pull.sourceHash, ...slotOf(pull) }),
  );
}

/** Deletes a puller whose download is no longer wanted, and waits until it is gone. */
export async function abandonPull(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  pending: PendingPull,
  generation: number,
): Promise<void> {
  await ctx.step(
    'release',
    generation,
    () =>
      acts.short.releaseVolume({
        model: spec,
        jobName: pending.jobName,
        sourceHash: pending.sourceHash,
        abandon: true,
        ...slotOf(pending),
      }),
    () => `abandoned ${pending.jobName}`,
  );
}
