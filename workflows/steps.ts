// The lifecycle's steps, one row each: the phase a step puts the model in, the condition it satisfies, the
// activities' progress reports that describe it, and the budget its long wait runs against. Status transitions, the
// failure classification and the condition order read this table; a new step is a row here and its name in the
// contract's `Step` (TypeScript then asks for the row).
import type { ConditionType, Phase, Step, StepProgress } from './contract/index.js';

export interface StepRow {
  /** The phase while it runs; `engine` is Starting on a first rollout and Updating on a model that has served. */
  phase: Phase | 'engine';
  /** The condition it makes True when it succeeds (Unknown while it runs, False when it fails). */
  condition?: { type: ConditionType; reason: string; message: string };
  /** The `progress` reports (by their `step`) that describe this step while it runs. */
  progress: readonly StepProgress['step'][];
  /** The spec budget its long wait runs against: a timeout means that budget ran out, and is final. */
  budget?: 'puller' | 'startup';
  /** A span over other steps, never "the step running now". */
  span?: true;
}

export const STEPS: Readonly<Record<Step, StepRow>> = {
  claim: {
    phase: 'Pending',
    condition: {
      type: 'NameClaimed',
      reason: 'Claimed',
      message: 'every object the model needs is free or already ours',
    },
    progress: ['claim'],
  },
  storage: {
    phase: 'Provisioning',
    condition: { type: 'StorageReady', reason: 'Applied', message: 'the weights volume is applied' },
    progress: ['storage'],
  },
  download: {
    phase: 'Downloading',
    condition: { type: 'WeightsReady', reason: 'Downloaded', message: 'the weights are on the volume' },
    progress: ['download'],
    budget: 'puller',
  },
  release: {
    phase: 'Releasing',
    condition: {
      type: 'VolumeReleased',
      reason: 'Released',
      message: 'the puller is gone; the volume is free for the engine',
    },
    progress: ['release'],
  },
  stop: { phase: 'Updating', progress: ['stop'] },
  rollout: {
    phase: 'engine',
    condition: { type: 'RolledOut', reason: 'RolledOut', message: 'the Deployment rolled out the current spec' },
    progress: ['rollout'],
    budget: 'startup',
  },
  startup: {
    phase: 'engine',
    condition: { type: 'Healthy', reason: 'Healthy', message: 'a replica of the current revision answers /health' },
    progress: ['startup'],
    budget: 'startup',
  },
  /** The LoRA adapters: their files on the volume, then loaded on every ready replica. */
  adapters: { phase: 'engine', progress: ['adapters'] },
  /** The load baseline of a model with `spec.slo`: the highest concurrency one replica carries within it. */
  baseline: { phase: 'engine', progress: ['baseline'] },
  teardown: { phase: 'Deleting', progress: ['teardown'] },
  update: { phase: 'Updating', progress: [], span: true },
  degraded: { phase: 'Degraded', progress: [], span: true },
  /** A look put back what drifted (a deleted Service, a Deployment scaled by hand); recorded closed, with the detail. */
  repair: { phase: 'Ready', progress: [], span: true },
};

/** The order conditions are listed in: the order the lifecycle satisfies them, `Ready` last. */
export const CONDITION_ORDER: readonly ConditionType[] = [
  ...Object.values(STEPS).flatMap((row) => (row.condition ? [row.condition.type] : [])),
  'Ready',
];
