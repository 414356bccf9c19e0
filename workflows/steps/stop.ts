// Stopping the engine: scaled to 0, its pods gone, so the ReadWriteOnce volume is free for a puller or a rebuild.
import type { Activities } from '../activity-options.js';
import type { ServedModel, Slot } from '../contract/index.js';
import { slotOf, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const stopRow: StepRow = { phase: 'Updating', progress: ['stop'] };

/** Scales the engine to 0 and waits until its pods are gone. */
export async function stopEngine(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
  slot?: Slot,
): Promise<void> {
  await ctx.step(
    'stop',
    generation,
    () => acts.short.scaleEngine({ model: spec, replicas: 0, ...slotOf({ slot }) }),
    () => 'scaled to 0',
  );
}
