// A rollout in the status (docs/design/rollout.md): `status.rollout` from its start to its promotion or its abort, and
// `status.revisions` with each revision's share. Pure; the sequence is workflows/steps/shift.ts'.
import type { ModelStatus, RevisionStatus, RolloutStatus, Slot } from '../contract/index.js';
import { setCondition } from './conditions.js';
import { endStep, openEntry } from './timeline.js';

/** What a rollout is between: the revision that serves and the candidate, each in its slot with its weights. */
export interface RolloutRevisions {
  current: { name: string; slot: Slot; source: string };
  candidate: { name: string; slot: Slot; source: string };
}

const revisions = (r: RolloutRevisions, traffic: number): RevisionStatus[] => [
  { name: r.current.name, role: 'current', slot: r.current.slot, source: r.current.source, weight: 100 - traffic },
  { name: r.candidate.name, role: 'candidate', slot: r.candidate.slot, source: r.candidate.source, weight: traffic },
];

const withRollout = (status: ModelStatus, rollout: RolloutStatus, now: string): ModelStatus => ({
  ...status,
  rollout,
  updatedAt: now,
});

/** A candidate starts beside the current revision: phase Updating, the current one still taking every request. */
export function beginRollout(
  status: ModelStatus,
  r: RolloutRevisions & { strategy: RolloutStatus['strategy']; generation: number; steps: number; undo?: boolean },
  now: string,
): ModelStatus {
  const rollout: RolloutStatus = {
    revision: r.candidate.name,
    from: r.current.name,
    strategy: r.strategy,
    ...(r.undo ? { undo: true } : {}),
    generation: r.generation,
    state: 'Progressing',
    step: 0,
    steps: r.steps,
    traffic: 0,
    gates: [],
    startedAt: now,
  };
  const phase = status.phase === 'Updating' ? {} : { phase: 'Updating' as const };
  return { ...withRollout(status, rollout, now), ...phase, revisions: revisions(r, 0) };
}

/** Step `step` under way: the candidate's share is `traffic`. */
export function rolloutAt(status: ModelStatus, r: RolloutRevisions, step: number, traffic: number, now: string) {
  const rollout = status.rollout!;
  return { ...withRollout(status, { ...rollout, step, traffic }, now), revisions: revisions(r, traffic) };
}

/** An approval gate starts (or stops) waiting. */
export function awaitingApproval(status: ModelStatus, awaiting: RolloutStatus['awaiting'], now: string): ModelStatus {
  const { awaiting: _was, ...rollout } = status.rollout!;
  return withRollout(status, awaiting ? { ...rollout, awaiting } : rollout, now);
}

/** An evaluation gate's workflow starts (or stops) running. */
export function evaluating(status: ModelStatus, value: RolloutStatus['evaluating'], now: string): ModelStatus {
  const { evaluating: _was, ...rollout } = status.rollout!;
  return withRollout(status, value ? { ...rollout, evaluating: value } : rollout, now);
}

/** A gate decided. */
export function gateDecided(
  status: ModelStatus,
  gate: { step: number; gate: string; result: 'Passed' | 'Failed'; message: string },
  now: string,
): ModelStatus {
  const rollout = status.rollout!;
  return withRollout(status, { ...rollout, gates: [...rollout.gates, { ...gate, at: now }] }, now);
}

/**
 * The candidate takes every request and is the current revision; the one before is `previous` while its volume is
 * kept. The rest of Ready is `markReady`'s.
 */
export function promoted(status: ModelStatus, r: RolloutRevisions, keptPrevious: boolean, now: string): ModelStatus {
  const rollout = status.rollout!;
  const current: RevisionStatus = { ...r.candidate, role: 'current', weight: 100 };
  const previous: RevisionStatus[] = keptPrevious ? [{ ...r.current, role: 'previous', weight: 0 }] : [];
  return {
    ...withRollout(status, { ...rollout, state: 'Promoted', traffic: 100, endedAt: now }, now),
    revision: r.candidate.name,
    revisions: [current, ...previous],
  };
}

/**
 * The candidate is rolled back: the current revision takes every request and the model is Ready on it, with reason
 * RolloutAborted; `lastError` says why (the failed step's, or the gate's). The spec in force is the current revision's.
 */
export function aborted(
  status: ModelStatus,
  r: RolloutRevisions & { sourceHash: string | undefined; generation: number },
  message: string,
  now: string,
): ModelStatus {
  const rollout = status.rollout!;
  let next: ModelStatus = {
    ...withRollout(status, { ...rollout, state: 'Aborted', traffic: 0, message, endedAt: now }, now),
    phase: 'Ready',
    source: r.current.source,
    sourceHash: r.sourceHash,
    observedGeneration: r.generation,
    revisions: [{ ...r.current, role: 'current', weight: 100 }],
    waiting: undefined,
  };
  if (openEntry(next, 'update')) next = endStep(next, 'update', 'Failed', now, `rolled back: ${message}`);
  return setCondition(
    next,
    {
      type: 'Ready',
      status: 'True',
      reason: 'RolloutAborted',
      message: `serving ${r.current.name}; ${r.candidate.name} was rolled back: ${message}`,
      observedGeneration: r.generation,
    },
    now,
  );
}
