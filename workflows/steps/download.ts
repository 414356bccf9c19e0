// The download: the weight puller's Job, under its deadline, unless the volume already holds the source; then the
// volume is released (release.ts). A stale puller is abandoned first, and a running engine stopped (stop.ts).
import { isCancellation } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import { describeSource, type PendingPull, type StorageResult } from '../contract/index.js';
import { downloadWritten, skipDownload } from '../status/transitions.js';
import { now, slotOf, type ModelObjects, type StepContext } from './context.js';
import { abandonPull, releaseVolume } from './release.js';
import { stopEngine } from './stop.js';
import type { StepRow } from './table.js';

export const downloadRow: StepRow = {
  phase: 'Downloading',
  condition: { type: 'WeightsReady', reason: 'Downloaded', message: 'the weights are on the volume' },
  progress: ['download'],
  budget: 'puller',
};

/** Abandons a stale puller, then downloads unless the volume already holds the source, and releases the volume. */
export async function pullWeights(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  storage: StorageResult | undefined,
  generation: number,
): Promise<void> {
  const { world } = ctx;
  const { model: spec, sourceHash } = objects;
  const pending = world.pendingPull;
  if (pending && (pending.sourceHash !== sourceHash || pending.failed || storage?.holdsSource)) {
    // A puller of other weights (or a failed one) must not keep the volume; its download is abandoned.
    await abandonPull(ctx, acts, spec, pending, generation);
    world.pendingPull = undefined;
  }
  if (storage?.holdsSource) {
    const detail = `the volume already holds ${describeSource(spec.spec.source)}`;
    ctx.set(skipDownload(ctx.status, generation, now(), detail));
    return;
  }
  if (world.engineApplied) {
    // ReadWriteOnce: the engine's pod must let go of the volume before the puller can mount it.
    await stopEngine(ctx, acts, spec, generation, objects.slot);
  }
  const pulled = await ctx.step(
    'download',
    generation,
    async () => {
      const { jobName } = await acts.short.startPuller(objects);
      const pull: PendingPull = { jobName, sourceHash, failed: false, ...slotOf(objects) };
      world.pendingPull = pull;
      try {
        return await acts.puller.awaitPuller({ model: spec, jobName, ...slotOf(objects) });
      } catch (err) {
        if (!isCancellation(err)) pull.failed = true;
        throw err;
      }
    },
    (r) => `${r.jobName} in ${Math.round(r.durationMs / 1000)}s`,
  );
  if (pulled.bytes !== undefined) ctx.set(downloadWritten(ctx.status, pulled.bytes, now()));
  await releaseVolume(ctx, acts, spec, { jobName: pulled.jobName, sourceHash, ...slotOf(objects) }, generation);
  world.pendingPull = undefined;
}
