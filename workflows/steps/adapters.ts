// The LoRA adapters a spec lists: their files on the volume, then loaded on every ready replica (after the health check
// of a reconcile), and loaded again whenever a look finds engines that do not hold them.
import { patchedUnlessPinned } from '../pinned.js';
import type { Activities } from '../activity-options.js';
import type { LookResult, ModelStatus } from '../contract/index.js';
import { adapterProblem, adapterStatuses, adaptersForgotten } from '../status/adapters.js';
import { observe } from '../status/transitions.js';
import { now, slotOf, type ModelObjects, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const adaptersRow: StepRow = { phase: 'engine', progress: ['adapters'] };

/**
 * Runs with this patch keep the LoRA adapters a spec lists on every ready replica: after the health check of a
 * reconcile (the `adapters` step), and whenever a look finds engines that do not hold them.
 */
const LORA_ADAPTERS = 'lora-adapters';

/** The adapters step of a reconcile, for a spec that lists adapters (in runs with LORA_ADAPTERS). */
export async function adaptersStep(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  generation: number,
): Promise<void> {
  if (!patchedUnlessPinned(LORA_ADAPTERS)) return;
  await ctx.step(
    'adapters',
    generation,
    () => loadAdapters(ctx, acts, objects),
    () => adapterSummary(ctx.status),
  );
}

/** Puts the listed adapters' files on the volume and loads them on every ready replica; records their status. */
async function loadAdapters(ctx: StepContext, acts: Activities, objects: ModelObjects): Promise<void> {
  const { model } = objects;
  const adapters = model.spec.engine.lora.adapters ?? [];
  const files = await acts.puller.fetchAdapters(objects);
  // Only what is on the volume is loaded: the engines are asked for nothing whose files are not there.
  const missing = new Set(files.failed.map((f) => f.name));
  const lora = { ...model.spec.engine.lora, adapters: adapters.filter((a) => !missing.has(a.name)) };
  const onVolume = { ...model, spec: { ...model.spec, engine: { ...model.spec.engine, lora } } };
  const sync = await acts.short.syncAdapters({ model: onVolume, ...slotOf(objects) });
  ctx.world.adapterIncarnations = sync.incarnations;
  const names = adapters.map((a) => a.name);
  ctx.set({ ...ctx.status, adapters: adapterStatuses(names, files, sync) });
}

/**
 * After a look at a model that lists adapters: engines that are new since the adapters were loaded, or adapters
 * still missing (not refused for good), are loaded again, and the status shows the gap while it lasts.
 */
export async function keepAdapters(ctx: StepContext, acts: Activities, look: LookResult): Promise<void> {
  const loadedOn = ctx.world.adapterIncarnations;
  if (!look.incarnations || loadedOn === undefined || !patchedUnlessPinned(LORA_ADAPTERS)) return;
  const fresh = look.incarnations.filter((pod) => !loadedOn.includes(pod));
  const missing = (ctx.status.adapters ?? []).some((a) => a.state === 'Missing');
  if (fresh.length === 0 && !missing && look.incarnations.length === loadedOn.length) return;
  if (fresh.length > 0) {
    const pods = fresh.map((pod) => pod.split('/')[0]!);
    const gap = adaptersForgotten(ctx.status, pods, look.readyReplicas);
    const problem = adapterProblem(gap.adapters);
    ctx.set(problem ? observe(gap, { ...look, problem }, now()) : gap);
  }
  const { rootUid, sourceHash } = ctx.world;
  await loadAdapters(ctx, acts, { model: ctx.desired, rootUid: rootUid!, sourceHash: sourceHash! });
}

/** `2 adapters loaded on 2 replicas` or which are not: the adapters step's timeline detail. */
function adapterSummary(status: ModelStatus): string {
  const adapters = status.adapters ?? [];
  const loaded = adapters.filter((a) => a.state === 'Loaded');
  const replicas = adapters[0]?.readyReplicas ?? 0;
  const rest = adapters.filter((a) => a.state !== 'Loaded').map((a) => `${a.name} ${a.state}`);
  return `${loaded.length} of ${adapters.length} adapters loaded on ${replicas} ${replicas === 1 ? 'replica' : 'replicas'}${rest.length ? `; ${rest.join(', ')}` : ''}`;
}
