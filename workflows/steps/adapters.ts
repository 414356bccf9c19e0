// The LoRA adapters a spec lists: their files on the volume, then loaded on every ready replica (after the health check
// of a reconcile), and loaded again whenever a look finds engines that do not hold them.
import { sleep } from '@temporalio/workflow';
import { patchedUnlessPinned } from '../pinned.js';
import type { Activities } from '../activity-options.js';
import type { AdapterStatus, LookResult } from '../contract/index.js';
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
    () => adapterSummary(ctx.status.adapters),
  );
}

/** The adapters a revision's replicas hold: each one's state, and the engines (incarnations) they were loaded on. */
export interface HeldAdapters {
  adapters: AdapterStatus[];
  incarnations: string[];
}

/** Puts the listed adapters' files on the volume and loads them on every ready replica; records their status. */
async function loadAdapters(ctx: StepContext, acts: Activities, objects: ModelObjects): Promise<void> {
  const held = await adaptersOn(acts, objects);
  ctx.world.adapterIncarnations = held.incarnations;
  ctx.set({ ...ctx.status, adapters: held.adapters });
}

/** The listed adapters' files on the volume of `objects`' slot, then loaded on each of that slot's ready replicas. */
async function adaptersOn(acts: Activities, objects: ModelObjects): Promise<HeldAdapters> {
  const { model } = objects;
  const adapters = model.spec.engine.lora.adapters ?? [];
  const files = await acts.puller.fetchAdapters(objects);
  // Only what is on the volume is loaded: the engines are asked for nothing whose files are not there.
  const missing = new Set(files.failed.map((f) => f.name));
  const lora = { ...model.spec.engine.lora, adapters: adapters.filter((a) => !missing.has(a.name)) };
  const onVolume = { ...model, spec: { ...model.spec, engine: { ...model.spec.engine, lora } } };
  const sync = await acts.short.syncAdapters({ model: onVolume, ...slotOf(objects) });
  const names = adapters.map((a) => a.name);
  return { adapters: adapterStatuses(names, files, sync), incarnations: sync.incarnations };
}

/**
 * A rollout's candidate, when the spec lists adapters: their files on its own volume and loaded on each of its ready
 * replicas before it takes a request (its `adapters` step). Throws, and so sends every request back to the current
 * revision, when the candidate lacks an adapter the current revision holds: a request naming it would fail there.
 * What it holds becomes the model's status at the promotion (the caller's).
 */
export async function candidateAdapters(
  ctx: StepContext,
  acts: Activities,
  objects: ModelObjects,
  generation: number,
  candidate: string,
): Promise<HeldAdapters | undefined> {
  if (!(objects.model.spec.engine.lora.adapters ?? []).length || !patchedUnlessPinned(LORA_ADAPTERS)) return undefined;
  const served = new Set((ctx.status.adapters ?? []).filter((a) => a.state === 'Loaded').map((a) => a.name));
  const lacking = (held: HeldAdapters) => held.adapters.filter((a) => served.has(a.name) && a.state !== 'Loaded');
  const held = await ctx.step(
    'adapters',
    generation,
    async () => {
      // An engine just ready may not answer yet (Missing): asked again a few times; one refused for good is final.
      for (let attempt = 1; ; attempt++) {
        const held = await adaptersOn(acts, objects);
        const short = lacking(held);
        if (short.length === 0 || attempt === CANDIDATE_ATTEMPTS || short.some((a) => a.state === 'Failed'))
          return held;
        await sleep(CANDIDATE_RETRY_MS * attempt);
      }
    },
    (h) => `${candidate}: ${adapterSummary(h.adapters)}`,
  );
  const problem = adapterProblem(lacking(held));
  if (problem) throw new Error(`${candidate} lacks what the current revision serves: ${problem.message}`);
  return held;
}

/** How often a candidate is asked for adapters it does not hold yet, and the first pause between (then 2×, 3×…). */
const CANDIDATE_ATTEMPTS = 4;
const CANDIDATE_RETRY_MS = 5_000;

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
  // In the current revision's slot: after a rollout, the second one.
  const objects = { model: ctx.desired, rootUid: rootUid!, sourceHash: sourceHash!, ...slotOf(ctx.world) };
  await loadAdapters(ctx, acts, objects);
}

/** `2 adapters loaded on 2 replicas` or which are not: the adapters step's timeline detail. */
function adapterSummary(adapters: AdapterStatus[] = []): string {
  const loaded = adapters.filter((a) => a.state === 'Loaded');
  const replicas = adapters[0]?.readyReplicas ?? 0;
  const rest = adapters.filter((a) => a.state !== 'Loaded').map((a) => `${a.name} ${a.state}`);
  return `${loaded.length} of ${adapters.length} adapters loaded on ${replicas} ${replicas === 1 ? 'replica' : 'replicas'}${rest.length ? `; ${rest.join(', ')}` : ''}`;
}
