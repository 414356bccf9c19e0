// The weights volume: its PVC applied for new weights, or when the storage part of the spec (or the labels) changed.
import type { Activities } from '../activity-options.js';
import { sameJson, type StorageResult } from '../contract/index.js';
import type { ModelObjects, StepContext } from './context.js';
import type { StepRow } from './table.js';

export const storageRow: StepRow = {
  phase: 'Provisioning',
  condition: { type: 'StorageReady', reason: 'Applied', message: 'the weights volume is applied' },
  progress: ['storage'],
};

/** Applies the PVC for new weights, or when what it is made from changed; undefined when nothing did. */
export async function applyStorage(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  newWeights: boolean,
  generation: number,
): Promise<StorageResult | undefined> {
  const spec = objects.model;
  const storageKey = { storage: spec.spec.storage, labels: spec.metadata.labels };
  if (!newWeights && sameJson(ctx.world.appliedStorage, storageKey)) return undefined;
  const storage = await ctx.step(
    'storage',
    generation,
    () => acts.short.applyStorage(objects),
    (r) => `${r.pvcName} ${r.phase}${r.holdsSource ? ', holds the weights' : ''}`,
  );
  ctx.world.appliedStorage = storageKey;
  return storage;
}
