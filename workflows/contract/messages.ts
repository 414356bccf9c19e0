// The ServeModelWorkflow's messages, input and result: defined once, imported by the workflow, the client,
// the worker and the activities alike. Pure: this file is part of the workflow bundle.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { Slot, StepProgress, TeardownResult } from './activities.js';
import { FAILURE } from './failures.js';
import { UPDATE_NAMES, type ModelRef } from './identity.js';
import type { ServedModel, SourceSpec } from './spec/index.js';
import type { Baseline, ModelStatus, MovedTo, Phase } from './status.js';

// ---------------------------------------------------------------------------------------------------------------
// Input and result

/** Knobs that tests (and impatient people) turn; production leaves them unset. */
export interface ServeModelOptions {
  /** How often a Degraded model is looked at (and a Ready one, in runs from before the watch). Default 30 s. */
  watchIntervalMs?: number;
  /**
   * How often a Ready model is looked at when nothing wakes it: the worker's watch signals `modelChanged` when one of
   * the model's objects changes, so this is only a safety net. Default 6 h.
   */
  safetyNetIntervalMs?: number;
  /** Continue as new once history is longer than this (or the server suggests it). Default 5,000 events. */
  continueAsNewAfterEvents?: number;
  /** Activity retries before a transient failure shows in status (the workflow then keeps retrying the step). */
  retry?: {
    /** Default 1 s. */
    initialIntervalMs?: number;
    /** Default 30 s; also caps the workflow's own backoff between attempts of a step and of teardown. */
    maximumIntervalMs?: number;
    /** Attempts of one activity before the workflow sees the failure. Default 10. */
    maximumAttempts?: number;
  };
  /** Added to the puller deadline and the startup budget for the activities' own timeouts. Default 5 min. */
  timeoutMarginMs?: number;
  /**
   * Heartbeat timeout of every activity: a step whose worker was lost is retried this soon. Default 10 s (the worker
   * heartbeats a running step every few seconds; the SDK sends at most one per 8 s, none for a step under 3 s).
   */
  heartbeatTimeoutMs?: number;
  /** How long a rollout's `health` gate watches the candidate take its share before judging it. Default 30 s. */
  healthGateWindowMs?: number;
}

/** A puller Job that was started and not yet released. */
export interface PendingPull {
  jobName: string;
  sourceHash: string;
  /** The download failed: the Job is kept for its logs until the next attempt replaces it. */
  failed: boolean;
  /** The slot whose volume it fills (unset: `a`). */
  slot?: Slot;
}

/** What a run hands to the next one when it continues as new. */
export interface CarriedState {
  status: ModelStatus;
  /** The generation last reconciled (Ready or Failed); below `status.generation` means work is due. */
  attemptedGeneration: number;
  rootUid?: string;
  /** Hash of the source whose weights the volume holds. */
  sourceHash?: string;
  /** The source whose weights the volume holds (set once downloaded, or found there). */
  volumeSource?: SourceSpec;
  /** A Deployment may exist: a new source must scale it to 0 before the puller mounts the volume. */
  engineApplied: boolean;
  /** The Deployment's `metadata.generation` after Ferry last applied it; a look that finds another repairs it. */
  engineGeneration?: number;
  pendingPull?: PendingPull;
  /** The storage part of the spec (and labels) last applied: a change re-applies the PVC on an in-place update. */
  appliedStorage?: unknown;
  /**
   * The ready engine pods the LoRA adapters were last loaded on (`<pod>/<uid8>/<restarts>`): a look that finds others
   * (a new replica, a replacement pod, a restarted engine) loads them again.
   */
  adapterIncarnations?: string[];
  /** The number of the newest revision accepted (docs/design/rollout.md, section 1); unset: 1. */
  revision?: number;
  /**
   * The slot the current revision's engine objects are in (docs/design/rollout.md, section 2); unset: `a`. Every
   * activity on the engine is given it.
   */
  slot?: Slot;
  /** A rollout's candidate while it has objects in the other slot: an update or a delete that cuts it short takes them away. */
  candidate?: { revision: string; slot: Slot };
  /**
   * The revision before the current one, while `rollout.keepRevisions` keeps its volume (its slot is the other), with
   * the spec it served with (what `ferry rollout undo` returns to; unset in runs from before the undo) and, with
   * `slo`, its baseline (an undo keeps it rather than measuring again, while nothing that moves it changed).
   */
  previous?: { revision: string; source: SourceSpec; spec?: ServedModel; baseline?: Baseline };
  /** An accepted `ferry rollout undo`: the generation that returns to `revision`, which it rolls out with no gate. */
  undo?: { revision: string; generation: number; reason?: string };
  /** A model with `spec.scaling`: the replica count the last decision set (unset: it starts at the spec's). */
  scaledReplicas?: number;
  /** A model with `spec.scaling.schedule`: the fewest replicas its schedule last set (unset: `minReplicas`). */
  scheduledMin?: number;
  /**
   * The autoscaler's latest decision, not yet applied (a newer one replaces it). Carried over, as the autoscaler sends
   * one again only after a minute; the next run applies it, or drops it if an update made it stale.
   */
  pendingScale?: ScaleDecision;
}

/** The workflow's argument. Versioned: a run started by an older client or carried over still parses. */
export interface ServeModelInput {
  version: 1;
  /** A parsed spec (`parseServedModel`); the workflow does not parse it again. */
  spec: ServedModel;
  options?: ServeModelOptions;
  /**
   * The tenant that owns the model (docs/security.md): set only by the Nexus handler of that tenant's endpoint, never
   * read from a document. Unset: an admin's model, which no tenant can reach.
   */
  tenant?: string;
  /**
   * Who asked, in the caller's own words: its Temporal identity (the library and CLI send the client's), or the tenant
   * and Nexus caller (a tenant's handler). Recorded on the timeline and in Events for audit; never decided on.
   */
  requestedBy?: string;
  /** Set only by continue-as-new. */
  state?: CarriedState;
}

/** The workflow's result once the model is deleted. */
export interface FinalStatus {
  status: ModelStatus;
  teardown: TeardownResult;
  /** Why it was deleted: the delete's reason, or `workflow cancelled`. */
  reason?: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Messages

export interface UpdateModelInput {
  /** The whole ServedModel document, as people write it; validated with the same schema as at start. */
  spec: unknown;
  /** Set by a tenant's Nexus handler: the update is refused (`ModelNotFound`) unless that tenant owns the model. */
  tenant?: string;
  /**
   * Who asked, in the caller's own words: its Temporal identity (the library and CLI send the client's), or the tenant
   * and Nexus caller (a tenant's handler). Recorded on the timeline and in Events for audit; never decided on.
   */
  requestedBy?: string;
}

export interface UpdateResult {
  accepted: true;
  /** The generation the model will be reconciled to; wait for `observedGeneration >= generation`. */
  generation: number;
  /** False when the document equals the current spec: nothing to do, the generation stays. */
  changed: boolean;
  /** The weights change: the engine is scaled to 0 and the new source pulled. */
  sourceChanged: boolean;
  /** Dotted paths of the fields that changed (`spec.engine.args`, `spec.replicas`). */
  changes: string[];
}

export interface DeleteModelInput {
  reason?: string;
  /** Set by a tenant's Nexus handler: the delete is refused (`ModelNotFound`) unless that tenant owns the model. */
  tenant?: string;
  /**
   * Who asked, in the caller's own words: its Temporal identity (the library and CLI send the client's), or the tenant
   * and Nexus caller (a tenant's handler). Recorded on the timeline and in Events for audit; never decided on.
   */
  requestedBy?: string;
  /**
   * Set by a move (`ferry move`, MoveModelWorkflow) once the model serves on the other cluster: the status says where
   * (`movedTo`) while this one is torn down, and after.
   */
  movedTo?: MovedTo;
}

export interface DeleteResult extends TeardownResult {
  reason?: string;
  /** Attempts of the teardown activity it took (1 when nothing failed). */
  attempts: number;
}

/** Change the spec. Rejected before it reaches history on an invalid document (failure type `InvalidSpec`, the
 * issues as details) or a change of an immutable field; returns at once, the workflow reconciles afterwards. */
export const updateModelUpdate = defineUpdate<UpdateResult, [UpdateModelInput]>(UPDATE_NAMES.update);

/** Tear the model down; returns once everything is deleted (or retained), then the workflow completes. */
export const deleteModelUpdate = defineUpdate<DeleteResult, [DeleteModelInput]>(UPDATE_NAMES.delete);

/**
 * The same change as the `update` Update, for a client that can only signal (a Temporal Schedule, Signal-With-Start,
 * the Web UI, `temporal workflow signal`). A signal cannot be refused before it lands: the workflow checks it with the
 * Update's validator and applies it like the Update, or records the refusal in status (`lastError`, the timeline, an
 * Event, a metric) and changes nothing. In the order they came. A workflow started with no spec (Signal-With-Start)
 * takes its spec from its first one.
 */
export const updateModelSignal = defineSignal<[UpdateModelInput]>(UPDATE_NAMES.update);

/** The same as the `delete` Update, without its answer: the model is torn down and the workflow completes. */
export const deleteModelSignal = defineSignal<[DeleteModelInput?]>(UPDATE_NAMES.delete);

/**
 * What a rollout's evaluation gate starts the team's workflow (`spec.rollout.evaluation.workflow`) with, as its one
 * argument. It passes the gate by completing, unless it returns `{ passed: false, message }`; it fails it by failing,
 * timing out or returning `passed: false`.
 */
export interface CandidateEvaluation {
  model: ModelRef;
  /** The candidate, `r<n>`, and the revision that serves beside it. */
  revision: string;
  current: string;
  /** The candidate's own engine: only the candidate answers there (OpenAI API, `servedModelName`). */
  endpoint: string;
  /** The model's endpoint (the front), where the candidate takes `traffic` percent of the requests. */
  modelEndpoint: string;
  servedModelName: string;
  /** The candidate's weights, as `status.source` says them. */
  source: string;
  /** The step (1-based) and the candidate's share during it, in percent. */
  step: number;
  traffic: number;
}

/** What an evaluation workflow may return to fail the gate without failing itself. */
export interface EvaluationVerdict {
  passed: boolean;
  message?: string;
}

/**
 * A person's or a program's word on a model's rollouts (docs/design/rollout.md): `ferry rollout approve|abort|undo`.
 */
export interface RolloutActionInput {
  /**
   * approve: pass the `approval` gate the rollout waits at. abort: roll the candidate back, whatever step it is at.
   * undo: return a Ready model to the revision before, whose weights are kept, with no gate.
   */
  action: 'approve' | 'abort' | 'undo';
  /**
   * The revision the action is meant for (`r<n>`): the candidate (approve, abort) or the revision before (undo);
   * refused when it is another. Unset: the one there is.
   */
  revision?: string;
  /** abort: keep the candidate's volume and its weights (for a look, or a retry that needn't pull again). */
  keepWeights?: boolean;
  /** Why, in the caller's words: recorded on the gate and in the rollout's status. */
  reason?: string;
  /** Who asked, in the caller's own words (recorded, never decided on). */
  requestedBy?: string;
  /** Set only by a tenant's Nexus handler (docs/security.md). */
  tenant?: string;
}

export interface RolloutActionResult {
  /** The candidate it was taken for; an undo's: the revision it returns to. */
  revision: string;
  action: RolloutActionInput['action'];
  /** An undo: the generation that returns to it (wait for Ready at it). */
  generation?: number;
}

/**
 * Approve or abort the rollout under way; refused (`NoRolloutWaiting`) when there is none, when an approve finds the
 * rollout not waiting for one, or when `revision` names another candidate. Returns once the workflow has it.
 */
export const rolloutActionUpdate = defineUpdate<RolloutActionResult, [RolloutActionInput]>('ferry.rollout');

/** A wait for a phase, held inside the workflow: see `awaitPhaseUpdate`. */
export interface AwaitPhaseInput {
  phases: Phase[];
  /** The spec generation the phase must be about (see `waitOutcome`). */
  generation: number;
}

/**
 * Returns the status once `waitOutcome` is decided for the input, or earlier, still pending, when the run is about to
 * continue as new or close (then ask again). One update per wait, where polling the `status` query once a second
 * would cost a billed query per second for as long as the model takes.
 */
export const awaitPhaseUpdate = defineUpdate<ModelStatus, [AwaitPhaseInput]>('ferry.awaitPhase');

/** The model's full status. */
export const statusQuery = defineQuery<ModelStatus>('status');

/** The spec the model is being brought to (the latest accepted one), with every default filled in. */
export const specQuery = defineQuery<ServedModel>('spec');

/** Activities report what they wait for (throttled by the sender); the workflow folds it into status. */
export const progressSignal = defineSignal<[StepProgress]>('progress');

/** What the worker's watch saw change among a model's objects (`Kind/name`, a few at most). */
export interface ModelChanged {
  objects: string[];
}

/** Sent by the worker's watch when one of a Ready or Degraded model's objects changes: the workflow looks. */
export const modelChangedSignal = defineSignal<[ModelChanged]>('ferry.modelChanged');

/**
 * A decision of the worker's autoscaler (docs/design/scaling.md): the replica count it wants, the count it saw in
 * force (`from`: a decision made against another count is stale and dropped), and why, in one line.
 */
export interface ScaleDecision {
  replicas: number;
  from: number;
  reason: string;
}

/** Sent by the worker's autoscaler when the load of a model with `spec.scaling` calls for another replica count. */
export const scaleSignal = defineSignal<[ScaleDecision]>('ferry.scale');

/** Failure type of a rejected update (or start): the document is invalid or changes an immutable field. */
export const INVALID_SPEC = FAILURE.InvalidSpec;
/** Failure type of a workflow started with an input version it does not know. */
export const UNSUPPORTED_INPUT = FAILURE.UnsupportedInput;
/** Failure type of an update sent to a model that is being deleted. */
export const MODEL_DELETING = FAILURE.ModelDeleting;

// ---------------------------------------------------------------------------------------------------------------
// Composition: a parent workflow that starts ServeModelWorkflow as a child cannot query it, so the child tells it.

/** Sent to the parent workflow (if any) on every phase change. */
export interface PhaseChange {
  workflowId: string;
  phase: Phase;
  generation: number;
  observedGeneration: number;
  endpoint?: string;
  lastError?: ModelStatus['lastError'];
}

export const phaseChangedSignal = defineSignal<[PhaseChange]>('ferry.phaseChanged');
