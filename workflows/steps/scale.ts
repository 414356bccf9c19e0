// A model with `spec.scaling` (docs/design/scaling.md): the replica count in force, the policy its Deployment carries
// for the worker's autoscaler, and the autoscaler's decisions applied — one `scaleEngine` each, a closed `scale`
// timeline entry, nothing in history while the load holds steady.
import { ActivityFailure, ApplicationFailure, isCancellation, log } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import {
  FAILURE,
  scalingPolicy,
  startingReplicas,
  type ModelStatus,
  type ScaleDecision,
  type ScalingPolicy,
  type ScalingSpec,
  type ServedModel,
} from '../contract/index.js';
import { baselineKey } from '../status/baseline.js';
import { endStep, openEntry } from '../status/timeline.js';
import { markReady } from '../status/transitions.js';
import { awaitHealth } from './health.js';
import { now, slotOf, type StepContext, type World } from './context.js';
import type { StepRow } from './table.js';

/** A decision applied; recorded closed, with the counts and the autoscaler's reason. */
export const scaleRow: StepRow = { phase: 'Ready', progress: [], span: true };

/** The timeline keeps this many `scale` entries: a busy model's decisions would crowd out everything else. */
export const KEPT_SCALE_ENTRIES = 20;

/** `status` with only its last KEPT_SCALE_ENTRIES `scale` entries (status.scaling counts them all). */
export function withRecentScaleEntries(status: ModelStatus): ModelStatus {
  const scales = status.timeline.filter((e) => e.step === 'scale');
  if (scales.length <= KEPT_SCALE_ENTRIES) return status;
  const dropped = new Set(scales.slice(0, scales.length - KEPT_SCALE_ENTRIES));
  return { ...status, timeline: status.timeline.filter((e) => !dropped.has(e)) };
}

/**
 * Whether the model may be at zero now: `idleToZeroAfter` with a front to hold requests meanwhile, and no schedule
 * window open (a window's floor is above minReplicas, so above zero).
 */
function zeroAllowed(spec: ServedModel, world: World): boolean {
  const { scaling, front } = spec.spec;
  if (scaling?.idleToZeroAfter === undefined || !front) return false;
  return world.scheduledMin === undefined || world.scheduledMin <= scaling.minReplicas;
}

/**
 * `spec.scaling` as it holds now: with the fewest replicas its schedule set last (World.scheduledMin), and without
 * `idleToZeroAfter` while zero is not allowed. What every count keeps to.
 */
function scalingInForce(spec: ServedModel, world: World): ScalingSpec | undefined {
  const { scaling } = spec.spec;
  if (!scaling) return undefined;
  const minReplicas =
    world.scheduledMin === undefined
      ? scaling.minReplicas
      : Math.min(Math.max(scaling.minReplicas, world.scheduledMin), scaling.maxReplicas);
  const { idleToZeroAfter, ...rest } = scaling;
  return {
    ...rest,
    minReplicas,
    ...(idleToZeroAfter !== undefined && zeroAllowed(spec, world) ? { idleToZeroAfter } : {}),
  };
}

/** The replica count in force for `spec`: the last decision's, within the bounds in force; the spec's without scaling. */
export function engineReplicas(spec: ServedModel, world: World): number {
  const scaling = scalingInForce(spec, world);
  if (!scaling) return spec.spec.replicas;
  // At zero while zero is allowed; a window that opens, or an update without idleToZeroAfter, brings the floor.
  if (world.scaledReplicas === 0 && scaling.idleToZeroAfter !== undefined) return 0;
  return startingReplicas(world.scaledReplicas ?? spec.spec.replicas, scaling);
}

/** The measured capacity of one replica, while the baseline holds for `spec` and found one. */
function measuredCapacity(status: ModelStatus, spec: ServedModel): number | undefined {
  const kept = status.baseline;
  return kept && kept.key === baselineKey(spec) && kept.maxConcurrency > 0 ? kept.maxConcurrency : undefined;
}

/** What the engine's objects are applied with: the count in force and, with scaling, the autoscaler's policy. */
export function engineScale(
  status: ModelStatus,
  spec: ServedModel,
  world: World,
): { replicas?: number; scaling?: ScalingPolicy } {
  const scaling = scalingInForce(spec, world);
  if (!scaling) return {};
  const policy = scalingPolicy(scaling, measuredCapacity(status, spec));
  return { replicas: engineReplicas(spec, world), ...(policy ? { scaling: policy } : {}) };
}

/** `status.scaling` for `spec` now (unset without scaling); the last decision is kept while scaling stays on. */
export function scalingStatus(status: ModelStatus, spec: ServedModel, world: World): ModelStatus {
  const { scaling } = spec.spec;
  if (!scaling) return status.scaling ? { ...status, scaling: undefined } : status;
  const { scaling: policy } = engineScale(status, spec, world);
  const replicas = engineReplicas(spec, world);
  const message = policy
    ? undefined
    : 'no targetConcurrency and no measured capacity yet (status.baseline): the count stays where it is';
  return {
    ...status,
    replicas,
    scaling: {
      replicas,
      minReplicas: scalingInForce(spec, world)!.minReplicas,
      maxReplicas: scaling.maxReplicas,
      ...(policy ? { targetConcurrency: policy.targetConcurrency } : {}),
      ...(status.scaling?.schedule && scaling.schedule ? { schedule: status.scaling.schedule } : {}),
      ...(message ? { message } : {}),
      ...(status.scaling?.lastDecision ? { lastDecision: status.scaling.lastDecision } : {}),
      ...(replicas === 0 && status.scaling?.idleSince ? { idleSince: status.scaling.idleSince } : {}),
      decisions: status.scaling?.decisions ?? 0,
    },
  };
}

/**
 * Why a decision is not applied, or undefined when it is: the model has no scaling (any more), the count is outside
 * the bounds, or it was made against another count than the one in force (stale, or already applied).
 */
export function decisionRefusal(spec: ServedModel, world: World, decision: ScaleDecision): string | undefined {
  const scaling = scalingInForce(spec, world);
  if (!scaling) return 'the model has no spec.scaling';
  const { replicas, from } = decision ?? {};
  const toZero = replicas === 0 && scaling.idleToZeroAfter !== undefined;
  if (
    !Number.isSafeInteger(replicas) ||
    (!toZero && (replicas < scaling.minReplicas || replicas > scaling.maxReplicas))
  ) {
    const zero = replicas === 0 ? ' (zero needs scaling.idleToZeroAfter, front, and no schedule window open)' : '';
    return `${String(replicas)} is outside ${scaling.minReplicas}..${scaling.maxReplicas}${zero}`;
  }
  const current = engineReplicas(spec, world);
  if (from !== current) return `made against ${String(from)} replicas, but ${current} are in force`;
  if (replicas === current) return `${current} replicas are already in force`;
  return undefined;
}

/**
 * Applies a decision `decisionRefusal` accepted: the Deployment's replica count (nothing else of it changes, no
 * rollout), then the count in force and a closed `scale` entry. A failed call changes nothing; the autoscaler decides
 * again on its next reading.
 */
export async function applyDecision(ctx: StepContext, acts: Activities, decision: ScaleDecision): Promise<void> {
  const spec = ctx.desired;
  const from = engineReplicas(spec, ctx.world);
  try {
    await acts.short.scaleEngine({ model: spec, replicas: decision.replicas, ...slotOf(ctx.world) });
  } catch (err) {
    if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
    log.warn('scaleEngine failed', { error: String(err.cause ?? err), replicas: decision.replicas });
    return;
  }
  ctx.world.scaledReplicas = decision.replicas;
  const at = now();
  const reason = String(decision.reason ?? '').slice(0, 300);
  const detail = `${from} → ${decision.replicas} replicas: ${reason}`;
  let next = withRecentScaleEntries(endStep(ctx.status, 'scale', 'Succeeded', at, detail));
  next = scalingStatus(next, spec, ctx.world);
  next = {
    ...next,
    scaling: {
      ...next.scaling!,
      lastDecision: { at, from, to: decision.replicas, reason },
      decisions: (next.scaling?.decisions ?? 0) + 1,
    },
  };
  if (decision.replicas === 0) {
    // No replica is wanted: Idle, not Degraded; a trouble of the replicas that were is over with them.
    if (openEntry(next, 'degraded')) next = endStep(next, 'degraded', 'Cancelled', at, 'scaled to zero');
    next = markReady(
      { ...next, scaling: { ...next.scaling!, idleSince: at } },
      { generation: next.observedGeneration, readyReplicas: 0 },
      at,
    );
  }
  ctx.set(next);
}

/**
 * A model `Idle` whose count is above zero again (the autoscaler's wake, a schedule window that opened): `Starting`
 * until a replica answers /health (the startup step, within engine.startupTimeout), then `Ready`. A startup that fails
 * for good leaves the model `Failed`, as a reconcile's would, until an update or a delete.
 */
export async function wakeUp(ctx: StepContext, acts: Activities): Promise<void> {
  if (ctx.status.phase !== 'Idle' || engineReplicas(ctx.desired, ctx.world) === 0) return;
  const generation = ctx.status.observedGeneration;
  try {
    const health = await awaitHealth(ctx, acts, ctx.desired, generation, ctx.world.slot);
    // One replica answered; the next look counts them all.
    ctx.set(markReady(ctx.status, { generation, endpoint: health.endpoint, readyReplicas: 1 }, now()));
  } catch (err) {
    if (err instanceof ApplicationFailure && err.type === FAILURE.ReconcileFailed) return;
    throw err;
  }
}
