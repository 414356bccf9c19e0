// A new revision rolled out beside the one that serves (docs/design/rollout.md, section 4): the candidate pulls into
// the model's other slot and starts there while the current revision takes every request; then the front gives it each
// step's share, each held by its gate; then every request, and the revision before is taken away. A failed step or
// gate sends every request back to the current revision and takes the candidate away. Pure orchestration: the
// activities are activities/steps/traffic.ts' and those of a first start, given the candidate's slot.
import { CancellationScope, isCancellation, sleep } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import {
  describeSource,
  newRevision,
  type Baseline,
  parseDuration,
  type RevisionShare,
  type ServedModel,
  type Slot,
} from '../contract/index.js';
import {
  aborted,
  awaitingApproval,
  beginRollout,
  gateDecided,
  promoted,
  rolloutAt,
  type RolloutRevisions,
} from '../status/rollout.js';
import { beginUpdate, byWhom, markReady, skipDownload, supersede } from '../status/transitions.js';
import { describeWord } from './rollout-control.js';
import { evaluationGate, type GateVerdict } from './evaluation.js';
import { healthGate } from './health-gate.js';
import { candidateAdapters } from './adapters.js';
import { admissionLimit, candidateBaseline } from './baseline.js';
import { now, type StepContext, type World } from './context.js';
import { awaitHealth } from './health.js';
import { releaseVolume } from './release.js';
import { engineReplicas, engineScale } from './scale.js';
import type { StepRow } from './table.js';

export const shiftRow: StepRow = { phase: 'Updating', progress: ['shift'] };

/** The revision that serves: the spec its engine was built from, its name and its slot. */
export interface Serving {
  spec: ServedModel;
  revision: string;
  slot: Slot;
}

/**
 * The strategy `spec` goes out with, when it goes out beside the revision that serves: a new revision (source or engine
 * pods) of a model whose `rollout` is BlueGreen or Canary, and whose current revision serves (applied, not at zero).
 */
export function rolloutFor(spec: ServedModel, serving: Serving | undefined, world: World) {
  const strategy = spec.spec.rollout?.strategy;
  if (strategy === undefined || strategy === 'Recreate' || !serving || !spec.spec.front) return undefined;
  if (!world.engineApplied || !world.rootUid || engineReplicas(serving.spec, world) === 0) return undefined;
  return newRevision(serving.spec, spec) ? strategy : undefined;
}

/** Rolls `spec` out as the next revision beside `serving`; the current revision serves whatever happens. */
export async function rollOutRevision(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
  serving: Serving,
): Promise<'promoted' | 'aborted'> {
  const { world } = ctx;
  const rollout = spec.spec.rollout!;
  // An undo returns to the revision before, under its name, with no gate: its weights are on the other slot's volume.
  const undo = world.undo?.generation === generation ? world.undo : undefined;
  const strategy: 'BlueGreen' | 'Canary' = !undo && rollout.strategy === 'Canary' ? 'Canary' : 'BlueGreen';
  const r: RolloutRevisions = {
    current: { name: serving.revision, slot: serving.slot, source: describeSource(serving.spec.spec.source) },
    candidate: {
      name: undo?.revision ?? `r${world.revision ?? 1}`,
      slot: serving.slot === 'b' ? 'a' : 'b',
      source: describeSource(spec.spec.source),
    },
  };
  const steps = undo ? [] : rollout.steps;
  const by = byWhom(ctx.status.requestedBy);
  const what = undo ? `undo to ${r.candidate.name}` : `${strategy} rollout of ${r.candidate.name}`;
  const why = undo?.reason ? `: ${undo.reason}` : '';
  ctx.set(beginUpdate(ctx.status, generation, now(), `generation ${generation}: ${what}${by}${why}`));
  const begun = { ...r, strategy, generation, steps: steps.length + 1, ...(undo ? { undo: true } : {}) };
  ctx.set(beginRollout(ctx.status, begun, now()));
  world.candidate = { revision: r.candidate.name, slot: r.candidate.slot };
  // An undo returns to a revision whose capacity was measured: kept, while nothing that moves it changed.
  const kept = undo ? world.previous?.baseline : undefined;
  // The candidate takes the slot the revision before kept its volume in: that one is kept no more.
  world.previous = undefined;
  try {
    const promotedTo = await ctx.rollout.run(() =>
      candidateSteps(ctx, acts, spec, generation, serving, r, steps, kept),
    );
    world.candidate = undefined;
    return promotedTo;
  } catch (err) {
    // Superseded by an update or a delete: the next reconcile (or the teardown) takes the candidate away.
    const word = ctx.rollout.aborted;
    if (isCancellation(err) && !word) throw err;
    const message = word ? describeWord(word) : err instanceof Error ? err.message : String(err);
    if (word) ctx.set(supersede(ctx.status, now(), message));
    const keepVolume = word?.keepWeights === true;
    await CancellationScope.nonCancellable(() => abandonCandidate(ctx, acts, spec, generation, keepVolume));
    ctx.set(aborted(ctx.status, { ...r, sourceHash: world.sourceHash, generation }, message, now()));
    return 'aborted';
  }
}

/** The candidate's way from nothing to every request; throws when a step or a gate fails. */
async function candidateSteps(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
  serving: Serving,
  r: RolloutRevisions,
  steps: RolloutStep[],
  keptBaseline?: Baseline,
): Promise<'promoted'> {
  const { world } = ctx;
  const slot = r.candidate.slot;
  const claimed = await ctx.step('claim', generation, () => acts.short.claimName({ model: spec }));
  const objects = { model: spec, rootUid: claimed.rootUid, sourceHash: claimed.sourceHash, ...inSlot(slot) };
  const storage = await ctx.step(
    'storage',
    generation,
    () => acts.short.applyStorage(objects),
    (s) => `${s.pvcName} ${s.phase}${s.holdsSource ? ', holds the weights' : ''}`,
  );
  if (storage.holdsSource) {
    ctx.set(skipDownload(ctx.status, generation, now(), `${storage.pvcName} already holds ${r.candidate.source}`));
  } else {
    const pulled = await ctx.step(
      'download',
      generation,
      async () => {
        const { jobName } = await acts.short.startPuller(objects);
        return await acts.puller.awaitPuller({ model: spec, jobName, ...inSlot(slot) });
      },
      (p) => `${p.jobName} in ${Math.round(p.durationMs / 1000)}s`,
    );
    await releaseVolume(ctx, acts, spec, { jobName: pulled.jobName, sourceHash: claimed.sourceHash, slot }, generation);
  }
  // As many replicas as the current revision has; the autoscaler keeps to the current one until the promotion.
  const replicas = engineReplicas(serving.spec, world);
  const rolled = await ctx.step(
    'rollout',
    generation,
    async () => {
      const applied = await acts.short.applyEngine({
        ...objects,
        replicas,
        ...admissionLimit(ctx.status, spec),
        shares: shares(r, 0),
      });
      return await acts.startup.awaitRollout({ model: spec, generation: applied.generation, ...inSlot(slot) });
    },
    (o) => `${r.candidate.name} in slot ${slot}: ${o.readyReplicas} ready`,
  );
  const health = await awaitHealth(ctx, acts, spec, generation, slot);
  // Its adapters, before the first request reaches it: weights, engine and adapters go out (and back) as one.
  const adapters = await candidateAdapters(ctx, acts, objects, generation, r.candidate.name);
  // With slo, its own capacity and admission limit, measured while no request reaches it.
  const baseline = await candidateBaseline(ctx, acts, objects, generation, r.candidate.name, keptBaseline);
  for (const [i, step] of steps.entries()) {
    await shift(ctx, acts, objects, r, step.traffic, generation);
    ctx.set(rolloutAt(ctx.status, r, i + 1, step.traffic, now()));
    const verdict =
      step.gate === 'evaluation'
        ? await evaluationGate(ctx, spec, r, health, i + 1, step.traffic)
        : await gate(ctx, acts, spec, slot, step, r);
    ctx.set(gateDecided(ctx.status, { step: i + 1, gate: step.gate, ...verdict }, now()));
    if (verdict.result === 'Failed')
      throw new Error(`step ${i + 1} (${step.traffic}%): gate ${step.gate}: ${verdict.message}`);
  }
  // Every request: the candidate is applied again with the scaling policy the current one had (and its own measured
  // capacity), then the front moved.
  const measured = baseline ? { ...ctx.status, baseline } : ctx.status;
  const scale = engineScale(measured, spec, world);
  const final = await ctx.step('rollout', generation, () =>
    acts.short.applyEngine({ ...objects, ...scale, ...admissionLimit(measured, spec), shares: shares(r, 100) }),
  );
  await shift(ctx, acts, objects, r, 100, generation);
  const keep = (spec.spec.rollout?.keepRevisions ?? 1) > 0;
  await ctx.step(
    'shift',
    generation,
    () => acts.short.retireRevision({ model: spec, slot: r.current.slot, keepVolume: keep }),
    (d) => `${r.current.name} taken away${d.deleted.length ? `: ${d.deleted.join(', ')}` : ''}`,
  );
  world.slot = slot === 'b' ? 'b' : undefined;
  world.volumeSource = spec.spec.source;
  world.sourceHash = claimed.sourceHash;
  world.engineGeneration = final.generation;
  world.appliedStorage = { storage: spec.spec.storage, labels: spec.metadata.labels };
  const servingBaseline = ctx.status.baseline ? { baseline: ctx.status.baseline } : {};
  world.previous = keep
    ? { revision: r.current.name, source: serving.spec.spec.source, spec: serving.spec, ...servingBaseline }
    : undefined;
  if (adapters) {
    world.adapterIncarnations = adapters.incarnations;
    ctx.set({ ...ctx.status, adapters: adapters.adapters });
  }
  if (baseline) ctx.set({ ...ctx.status, baseline });
  ctx.set({ ...promoted(ctx.status, r, keep, now()), sourceHash: claimed.sourceHash });
  ctx.set(markReady(ctx.status, { generation, endpoint: health.endpoint, readyReplicas: rolled.readyReplicas }, now()));
  return 'promoted';
}

type RolloutStep = NonNullable<ServedModel['spec']['rollout']>['steps'][number];

/** The front's shares with the candidate at `traffic` percent (a revision at 0 is not among them). */
function shares(r: RolloutRevisions, traffic: number): RevisionShare[] {
  const current = { revision: r.current.name, slot: r.current.slot, weight: 100 - traffic };
  const candidate = { revision: r.candidate.name, slot: r.candidate.slot, weight: traffic };
  return [current, candidate].filter((s) => s.weight > 0);
}

const inSlot = (slot: Slot): { slot?: 'b' } => (slot === 'b' ? { slot: 'b' } : {});

/** The front at the candidate's `traffic`, every front pod running it. */
async function shift(
  ctx: StepContext,
  acts: Activities,
  objects: { model: ServedModel; rootUid: string; sourceHash: string },
  r: RolloutRevisions,
  traffic: number,
  generation: number,
): Promise<void> {
  await ctx.step(
    'shift',
    generation,
    () => acts.shift.shiftTraffic({ ...objects, shares: shares(r, traffic) }),
    () => `${r.candidate.name} ${traffic}%, ${r.current.name} ${100 - traffic}%`,
  );
}

/**
 * A step's gate: a pause (one durable timer), an approval (`ferry rollout approve`, or its timeout), or the candidate
 * healthy after it took its share for a while (health-gate.ts).
 */
async function gate(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  slot: Slot,
  step: RolloutStep,
  r: RolloutRevisions,
): Promise<GateVerdict> {
  const which = step.gate;
  if (which === 'approval') {
    const timeout = step.timeout ?? '24h';
    const onTimeout = step.onTimeout ?? 'abort';
    const since = now();
    const until = new Date(Date.parse(since) + parseDuration(timeout)).toISOString();
    ctx.set(awaitingApproval(ctx.status, { gate: 'approval', since, until, onTimeout }, since));
    const word = await ctx.rollout.approval(parseDuration(timeout));
    ctx.set(awaitingApproval(ctx.status, undefined, now()));
    if (word) return { result: 'Passed', message: describeWord(word) };
    return onTimeout === 'approve'
      ? { result: 'Passed', message: `no answer within ${timeout}: approved by onTimeout` }
      : { result: 'Failed', message: `no approval within ${timeout} (onTimeout abort)` };
  }
  if (which !== 'health') {
    await sleep(parseDuration(which));
    return { result: 'Passed', message: `paused ${which}` };
  }
  return await healthGate(ctx, acts, spec, slot, {
    candidate: r.candidate.name,
    current: r.current.name,
    traffic: step.traffic,
  });
}

/**
 * Every request back to the current revision, then the candidate's engine and volume taken away (its volume kept on
 * `ferry rollout abort --keep-weights`): after a failed step or gate, and when an update or a delete superseded a
 * rollout (world.candidate, cleared here).
 */
export async function abandonCandidate(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
  keepVolume = false,
): Promise<void> {
  const { world } = ctx;
  const candidate = world.candidate;
  if (!candidate || !world.rootUid) return;
  const current = { revision: ctx.status.revision ?? 'r1', slot: world.slot ?? 'a', weight: 100 };
  const objects = { model: spec, rootUid: world.rootUid, sourceHash: world.sourceHash ?? '' };
  if (spec.spec.front) {
    await ctx.step(
      'shift',
      generation,
      () => acts.shift.shiftTraffic({ ...objects, shares: [current] }),
      () => `every request to ${current.revision}`,
    );
  }
  await ctx.step(
    'shift',
    generation,
    () => acts.short.retireRevision({ model: spec, slot: candidate.slot, keepVolume }),
    (d) => `${candidate.revision} taken away${d.deleted.length ? `: ${d.deleted.join(', ')}` : ''}`,
  );
  world.candidate = undefined;
  const { rollout } = ctx.status;
  if (rollout?.state === 'Progressing' && rollout.generation !== generation) {
    // Cut short by this generation's update.
    const message = `cut short by generation ${generation}`;
    const revisions = [
      { name: current.revision, role: 'current' as const, slot: current.slot, source: ctx.status.source, weight: 100 },
    ];
    ctx.set({
      ...ctx.status,
      rollout: { ...rollout, state: 'Aborted', traffic: 0, message, endedAt: now() },
      revisions,
    });
  }
}
