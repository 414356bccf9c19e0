// The model's status as the workflow keeps it: what `ferry status`, the status query, search attributes and the
// Web UI's current details all show. Pure data and pure functions: this file is part of the workflow bundle.

/** The phases of a served model, in lifecycle order. */
export const PHASES = [
  'Pending',
  'Provisioning',
  'Downloading',
  'Releasing',
  'Starting',
  'Ready',
  'Idle',
  'Updating',
  'Degraded',
  'Failed',
  'Deleting',
  'Deleted',
] as const;
export type Phase = (typeof PHASES)[number];

export type ConditionType =
  'NameClaimed' | 'StorageReady' | 'WeightsReady' | 'VolumeReleased' | 'RolledOut' | 'Healthy' | 'Ready';

export interface Condition {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  /** CamelCase, machine-readable. */
  reason: string;
  /** One line for a person. */
  message: string;
  /** ISO time of the last change of status. */
  lastTransitionTime: string;
  /** The spec generation this condition was computed for. */
  observedGeneration: number;
}

/**
 * A step of the lifecycle as the timeline records it. `stop` scales the engine to 0 before a new source is pulled;
 * `update` and `degraded` are spans over other steps (an update until Ready, a Ready model's trouble); `repair` is a
 * look that put back what drifted (recorded closed, its detail says what); `scale` a decision of the autoscaler applied
 * (recorded closed: `1 → 2 replicas: …`).
 */
export type Step =
  | 'claim'
  | 'storage'
  | 'download'
  | 'release'
  | 'stop'
  | 'rollout'
  | 'startup'
  | 'adapters'
  | 'baseline'
  | 'shift'
  | 'update'
  | 'degraded'
  | 'repair'
  | 'scale'
  | 'teardown';

/** One step of the lifecycle with its timing; `endedAt` is unset while it runs. */
export interface TimelineEntry {
  step: Step;
  generation: number;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  outcome?: 'Succeeded' | 'Failed' | 'Skipped' | 'Cancelled';
  detail?: string;
}

export interface ModelError {
  reason: string;
  message: string;
  at: string;
  /** Where it happened: the step that failed. */
  step?: TimelineEntry['step'];
  /** The spec generation being reconciled (or watched) when it happened. */
  generation?: number;
  /** Set when this is a signalled change the workflow refused (signalled.ts): nothing of it was applied. */
  refused?: 'update';
}

export interface DownloadProgress {
  bytes: number;
  totalBytes?: number;
  /** Bytes per second over the puller's last progress interval (about 10 s); 0: stalled. */
  bytesPerSecond?: number;
  /** Seconds left at that rate, when the total is known and the rate is not 0. */
  etaSeconds?: number;
  /** Pod phase or waiting reason of the puller, e.g. Running, Unschedulable, ImagePullBackOff. */
  state: string;
  message?: string;
  updatedAt: string;
}

/** One LoRA adapter of `engine.lora.adapters` as the ready replicas hold it. */
export interface AdapterStatus {
  name: string;
  /**
   * Loaded: on every ready replica. Missing: not (yet) on some, to be tried again (the engine did not answer, a
   * replica is new). Failed: refused for good (no such source, no access, the engine refused it) until the spec or
   * the pods change.
   */
  state: 'Loaded' | 'Missing' | 'Failed';
  loadedReplicas: number;
  readyReplicas: number;
  /** Why it is not Loaded: the puller's reason or the engine's, and its words. */
  reason?: string;
  message?: string;
}

/**
 * The load baseline: the highest concurrency at which one replica met `spec.slo`, measured by streaming requests to
 * it (docs/design/baseline.md). Kept until something that moves it changes (`key`).
 */
export interface Baseline {
  maxConcurrency: number;
  /** The goal held at the measurement's ceiling, `spec.slo.maxConcurrency`: the capacity may be higher. */
  capped: boolean;
  /** At `maxConcurrency` (unset when it is 0). */
  ttftP95Ms?: number;
  itlP95Ms?: number;
  attainment?: number;
  /** The goal and the requests it was measured with. */
  goal: { ttft: string; itl: string; attainment: number };
  shape: { promptTokens: number; outputTokens: number };
  /** The generation it was measured at, and the hash of the spec fields that move it. */
  generation: number;
  key: string;
  measuredAt: string;
  durationMs: number;
  /** The concurrencies tried, in order, and whether the goal held at each: `1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗`. */
  probes: string;
  pod?: string;
}

/** A model with `spec.scaling`: the count the autoscaler set and why (docs/design/scaling.md). */
export interface ScalingStatus {
  /** The replica count in force: `spec.replicas` within the bounds at first, then each decision's. */
  replicas: number;
  /** The fewest replicas now: `spec.scaling.minReplicas`, or an open schedule window's when higher. */
  minReplicas: number;
  maxReplicas: number;
  /** With `spec.scaling.schedule`: the fewest replicas it sets now, and when that next changes (none in sight: unset). */
  schedule?: ScheduleStatus;
  /** Requests in flight per replica the decisions aim at; unset while unknown (no targetConcurrency, no baseline yet). */
  targetConcurrency?: number;
  /** Why the autoscaler cannot decide, when it cannot (no target yet). */
  message?: string;
  /** The last decision applied. */
  lastDecision?: { at: string; from: number; to: number; reason: string };
  /** Since when the model is at zero (phase Idle): no request came through its front for idleToZeroAfter. */
  idleSince?: string;
  decisions: number;
}

export interface ScheduleStatus {
  minReplicas: number;
  nextChangeAt?: string;
  nextMinReplicas?: number;
}

/**
 * The GPU-seconds the model's ready replicas held (ready replicas × `resources.gpus` × time), counted at each change
 * of the GPUs held: at `asOf` it was `gpuSeconds`, and `gpus` are held since, so now it is gpuSeconds + gpus × (now −
 * asOf). Replicas starting or waiting for a GPU are not counted.
 */
export interface Usage {
  gpuSeconds: number;
  gpus: number;
  asOf: string;
}

/** The GPU-seconds of `usage` at `now` (ISO time), to the millisecond. */
export function usageAt(usage: Usage, now: string): number {
  const seconds = Math.max(0, (Date.parse(now) - Date.parse(usage.asOf)) / 1000);
  return Math.round((usage.gpuSeconds + usage.gpus * seconds) * 1000) / 1000;
}

export interface ModelStatus {
  name: string;
  namespace: string;
  cluster: string;
  /** The tenant that owns the model, when a tenant's Nexus endpoint started it (docs/security.md). */
  tenant?: string;
  phase: Phase;
  conditions: Condition[];
  /** Where clients send requests once Ready. */
  endpoint?: string;
  servedModelName: string;
  /** The weights, as `huggingface:<repo>@<revision>` or `pvc:<claim>/<path>`; never a secret. */
  source: string;
  replicas: number;
  readyReplicas: number;
  /** sha256 of the source identity; `sourceHash.slice(0, 8)` names the puller Job and weights directory. */
  sourceHash?: string;
  /**
   * The revision the engine was last rolled out with, `r<n>` (docs/design/rollout.md): each change of the source or of
   * the engine's pods is the next. What the front's `x-ferry-revision` header says.
   */
  revision?: string;
  /** Incremented by every accepted spec change (start is 1). */
  generation: number;
  /** Who asked for `generation`, as the caller said (`requestedBy` of its start or update); unset when it did not say. */
  requestedBy?: string;
  /** The generation the cluster was last brought to. */
  observedGeneration: number;
  lastError?: ModelError;
  timeline: TimelineEntry[];
  download?: DownloadProgress;
  /** Each adapter of `engine.lora.adapters`, once the adapters step has run; unset for a model that lists none. */
  adapters?: AdapterStatus[];
  /** The measured load baseline of a model with `spec.slo`, once measured. */
  baseline?: Baseline;
  /** `spec.expiresAt`: when the model deletes itself. */
  expiresAt?: string;
  /** GPU-seconds held by the ready replicas; unset until a replica with GPUs was ready. */
  usage?: Usage;
  /** A model with `spec.scaling`: the count in force and the last decision. */
  scaling?: ScalingStatus;
  /** A waiting state that needs no person, such as Unschedulable until a GPU node appears. */
  waiting?: { reason: string; message: string; since: string };
  /** The last rollout of a new revision beside the current one (`spec.rollout` BlueGreen or Canary). */
  rollout?: RolloutStatus;
  /** The revisions the model has objects for, with their share of the requests (docs/design/rollout.md). */
  revisions?: RevisionStatus[];
  /** Moved to another cluster (`ferry move`): where it serves now, and when the move switched to it. */
  movedTo?: MovedTo & { at: string };
  startedAt: string;
  updatedAt: string;
}

/** Where a moved model serves now (`ferry move`, docs/design/fleet.md §3). */
export interface MovedTo {
  cluster: string;
  endpoint?: string;
  /** The move's workflow ID. */
  move: string;
}

/** One rollout (docs/design/rollout.md, section 4). */
export interface RolloutStatus {
  /** The candidate, `r<n>`, and the revision it replaces. */
  revision: string;
  from: string;
  strategy: 'BlueGreen' | 'Canary';
  /** An undo (`ferry rollout undo`): the revision before, returned to with no gate. */
  undo?: boolean;
  /** The spec generation that asked for it. */
  generation: number;
  /** Progressing until the candidate takes every request (Promoted) or none any more (Aborted). */
  state: 'Progressing' | 'Promoted' | 'Aborted';
  /** The step under way or last held (1-based; 0 while the candidate starts), of `steps`. */
  step: number;
  steps: number;
  /** The candidate's share of the requests now, in percent. */
  traffic: number;
  /** Each gate decided, in order. */
  gates: { step: number; gate: string; result: 'Passed' | 'Failed'; message: string; at: string }[];
  /** Why it was aborted. */
  message?: string;
  /** An approval gate waiting: since when, until when, and what its timeout does. */
  awaiting?: { gate: 'approval'; since: string; until: string; onTimeout: 'abort' | 'approve' };
  /** An evaluation gate under way: the team's workflow (its id, to follow it in Temporal), since and until when. */
  evaluating?: { workflowId: string; workflowType: string; since: string; until: string };
  startedAt: string;
  endedAt?: string;
}

/** A revision with objects in one of the model's slots. */
export interface RevisionStatus {
  name: string;
  role: 'current' | 'candidate' | 'previous';
  slot: 'a' | 'b';
  /** Its weights, as `status.source` says them. */
  source: string;
  /** Its share of the requests through the front, in percent (a previous revision: 0, its engine stopped). */
  weight: number;
}

/** What a status means for someone waiting for `phases` at spec `generation`. */
export type WaitOutcome = 'done' | 'failed' | 'deleted' | 'pending';

/**
 * `done` once the model is in one of `phases` at `generation` (or a newer one); `failed` once an attempt at it
 * failed (unless Failed is waited for), or it is Degraded because a LoRA adapter it lists was refused for good;
 * `deleted` once it is being deleted (unless that is waited for).
 */
export function waitOutcome(status: ModelStatus, phases: readonly Phase[], generation: number): WaitOutcome {
  // Idle serves as Ready does: its front holds a request and wakes it.
  const reached = phases.includes(status.phase) || (status.phase === 'Idle' && phases.includes('Ready'));
  // A rollout that was rolled back leaves the model Ready on the revision before: what was asked for did not happen.
  const { rollout } = status;
  if (rollout?.state === 'Aborted' && rollout.generation >= generation && status.generation === rollout.generation) {
    return 'failed';
  }
  if (reached && atGeneration(status, generation)) return 'done';
  if (status.phase === 'Failed' && atGeneration(status, generation)) return 'failed';
  // The base serves, but an adapter the spec lists was refused for good: only another spec brings it.
  if (status.phase === 'Degraded' && status.lastError?.reason === 'AdapterFailed' && atGeneration(status, generation)) {
    return 'failed';
  }
  const deleting = status.phase === 'Deleting' || status.phase === 'Deleted';
  if (deleting && !phases.includes('Deleting') && !phases.includes('Deleted')) return 'deleted';
  return 'pending';
}

/** Whether the status's phase is about `generation` (or a newer one). */
function atGeneration(status: ModelStatus, generation: number): boolean {
  switch (status.phase) {
    case 'Ready':
    case 'Idle':
    case 'Degraded':
      return status.observedGeneration >= generation;
    case 'Failed':
      return (status.lastError?.generation ?? status.generation) >= generation;
    case 'Deleting':
    case 'Deleted':
      return true;
    default:
      return status.generation >= generation;
  }
}
