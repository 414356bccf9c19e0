// The activities a ServeModelWorkflow calls, with their inputs and results. Workflows import them as types only.
import type { ModelRef } from './identity.js';
import type { CapacityReading, ClusterCapacityInput } from './placement.js';
import type { ScalingPolicy, ServedModel, SpecIssue } from './spec/index.js';
import type { Step } from './status.js';

/** What a long-running activity reports while it waits; sent to the workflow as the `progress` signal. */
export interface StepProgress {
  /** A step that runs activities: not the spans over other steps. */
  step: Exclude<Step, 'update' | 'degraded' | 'repair'>;
  /** Pod phase or a named waiting reason: Pending, Running, Unschedulable, ImagePullBackOff, Loading, … */
  state: string;
  message?: string;
  bytes?: number;
  totalBytes?: number;
  /** The download's rate over the puller's last progress interval. */
  bytesPerSecond?: number;
  readyReplicas?: number;
}

/**
 * Where a revision's engine objects live (docs/design/rollout.md, section 2): `a`, the model's own names (every model
 * before its first rollout), or `b`, the names a model called `<name>-b` would give its engine.
 */
export type Slot = 'a' | 'b';

export interface ModelInput {
  model: ServedModel;
  /** The revision's slot whose engine objects the activity works on; unset: `a`. */
  slot?: Slot;
}

export interface ClaimResult {
  /** uid of the model's root object; every other object except a retained PVC names it as owner. */
  rootUid: string;
  sourceHash: string;
  /** Objects of ours that already existed (a resumed model), as `Kind/name`. */
  resumed: string[];
}

export interface StorageResult {
  pvcName: string;
  /** PVC phase at return; Pending with WaitForFirstConsumer storage is normal until the first pod. */
  phase: string;
  /** The volume already holds this source's weights: the download can be skipped. */
  holdsSource: boolean;
}

export interface ObjectsInput extends ModelInput {
  rootUid: string;
  sourceHash: string;
}

export interface PullerResult {
  jobName: string;
  durationMs: number;
  /** What the puller reported having written (its FERRY_DONE line), when its log could be read. */
  bytes?: number;
}

export interface RolloutResult {
  generation: number;
  readyReplicas: number;
  updatedReplicas: number;
}

export interface HealthResult {
  endpoint: string;
  /** The engine's own address when `endpoint` is the front's: where only this slot's replicas answer. */
  engineEndpoint?: string;
  models: string[];
  /** Set when /v1/models needs the API key and the worker does not hold it: only /health was verified. */
  note?: string;
}

/** A periodic look at a Ready model. */
export interface ObservedStatus {
  replicas: number;
  readyReplicas: number;
  /** Set when something is wrong, with a named reason (CrashLoopBackOff, ReplicasUnavailable, Unhealthy, …). */
  problem?: { reason: string; message: string };
  endpoint?: string;
  /** Asked for (`ReadStatusInput.frontCounters`) on a model with a front: what its pods counted, or why not. */
  front?: FrontCounters | { unread: string };
}

/** `readStatus` asked, for a rollout's health gate, for the front's counters too. */
export interface ReadStatusInput extends ModelInput {
  frontCounters?: boolean;
}

/**
 * The requests each revision answered through the model's front, summed over its ready pods: each pod's counters run
 * from its start, and a rollout's step starts new pods (the share is in their configuration), so they cover the step.
 */
export interface FrontCounters {
  pods: number;
  /**
   * By revision: the requests sent to it, those it answered, those that failed (a 5xx, a refused or broken connection,
   * a broken response), and its average response time in ms (HAProxy's, over its last 1024 requests).
   */
  revisions: Record<string, { requests: number; answered: number; failed: number; averageMs?: number }>;
}

/**
 * One revision behind a model's front and its share of the requests (docs/design/rollout.md, section 3). Unset where
 * an activity takes it: the one revision `r1`, in slot `a`, at 100.
 */
export interface RevisionShare {
  /** `r<n>`: the front's server, and what `x-ferry-revision` says. */
  revision: string;
  /** Where its objects are. */
  slot: Slot;
  /** Its share, in whole percent. */
  weight: number;
}

/**
 * A look that reconciles: which model (the activity reads the spec itself, so it does not travel in history with
 * every look), the generation it is Ready at, and what the engine's objects are built from.
 */
export interface LookInput {
  ref: ModelRef;
  generation: number;
  rootUid: string;
  sourceHash: string;
  /** The Deployment's `metadata.generation` after Ferry last applied it: another one means someone changed its spec. */
  engineGeneration?: number;
  /** The admission limit in force (from the baseline kept); unset: none. What a drifted admission ConfigMap gets back. */
  admissionLimit?: number;
  /** A model with `spec.scaling`: the replica count in force, and the policy its Deployment carries for the autoscaler. */
  replicas?: number;
  scaling?: ScalingPolicy;
  /** Wait this long before looking: a look woken right after another keeps its distance (set by the workflow). */
  delayMs?: number;
  /** The owning tenant (`status.tenant`): the look checks the model against its grant as it is now. */
  tenant?: string;
  /** With `spec.front`: the revisions it sends requests to (unset: `r1` alone). */
  shares?: RevisionShare[];
  /** The slot of the current revision, whose engine objects the look keeps (unset: `a`). */
  slot?: Slot;
}

/** What a look found and did: the engine as it is, and what it put back. */
export interface LookResult extends ObservedStatus {
  /** What drifted and was re-applied, in words: `Deployment/qwen deleted; re-created`. Empty when nothing drifted. */
  repaired: string[];
  /** The model's root object or its weights volume is gone or being deleted: only a whole reconcile brings it back. */
  lost?: { object: string; reason: string; message: string };
  /** The Deployment's `metadata.generation` now (after a repair, the repaired one). */
  engineGeneration?: number;
  /** For a model that lists LoRA adapters: its ready engine pods now, as `AdapterSyncResult.incarnations`. */
  incarnations?: string[];
}

/** One desired LoRA adapter as the ready replicas hold it after `syncAdapters`. */
export interface AdapterReplicas {
  name: string;
  /** Ready replicas of the current revision that hold it now. */
  loadedReplicas: number;
  readyReplicas: number;
  /**
   * Why it is missing on a replica, with the engine's own words. `permanent`: the engine refused it (a 4xx such as
   * a path without the adapter's files, a rank above maxLoraRank), so it is not tried again until the spec or the
   * pods change; otherwise the engine did not answer and it is tried again.
   */
  error?: { reason: 'AdapterRefused' | 'EngineUnreachable'; message: string; permanent: boolean };
}

/** What `fetchAdapters` put on the volume. */
export interface AdapterFilesResult {
  /** The adapter Job that ran; unset when the volume already held exactly the listed adapters. */
  jobName?: string;
  /** The adapters whose files are complete on the volume. */
  fetched: string[];
  /**
   * Those the Job could not fetch, with the puller's reason (SourceNotFound, AccessDenied, NoSpace, DownloadFailed,
   * DeadlineExceeded, …); `permanent`: no retry fixes it, the spec must change.
   */
  failed: { name: string; reason: string; message: string; permanent: boolean }[];
}

/** What `syncAdapters` found and did on every ready replica of the current revision. */
export interface AdapterSyncResult {
  adapters: AdapterReplicas[];
  /** What it unloaded because the spec no longer lists it, as `<adapter> from <pod>`. */
  unloaded: string[];
  /**
   * The ready pods it synced, as `<pod>/<uid8>/<restarts>`: a pod or a container restart not in this list has lost
   * its adapters (the engine keeps them in memory only).
   */
  incarnations: string[];
}

/** One probe of a load measurement: `concurrency` requests in flight, and how many met the goal. */
export interface BaselineProbe {
  concurrency: number;
  requests: number;
  good: number;
  /** Requests that did not complete (an HTTP error, a reset, a timeout). */
  errors: number;
  meets: boolean;
}

/** What `measureBaseline` found on one ready replica (docs/design/baseline.md). */
export interface BaselineMeasurement {
  /** Set when nothing was measured, with why (the engines are reached only through the API server's proxy). */
  skipped?: string;
  /** The highest concurrency at which the goal held: 0 when even one request at a time missed it. */
  maxConcurrency: number;
  /** The goal held at `spec.slo.maxConcurrency` itself: the capacity may be higher. */
  capped: boolean;
  /** Measured at `maxConcurrency` (unset when it is 0): p95 time to first token and inter-token latency. */
  ttftP95Ms?: number;
  itlP95Ms?: number;
  attainment?: number;
  /** The pod measured. */
  pod?: string;
  probes: BaselineProbe[];
  /** The first error a request met, if any (never a header or a key). */
  firstError?: string;
  durationMs: number;
}

export interface TeardownResult {
  /** `Kind/name` of each object deleted or already gone. */
  deleted: string[];
  /** `Kind/name` of what stays on purpose (a retained PVC). */
  retained: string[];
}

/** The activities a ServeModelWorkflow calls; `createActivities` in the worker builds them. */
export interface FerryActivities {
  claimName(input: ModelInput): Promise<ClaimResult>;
  applyStorage(input: ObjectsInput): Promise<StorageResult>;
  startPuller(input: ObjectsInput): Promise<{ jobName: string }>;
  awaitPuller(input: ModelInput & { jobName: string }): Promise<PullerResult>;
  /** `abandon`: the download was cancelled or failed; delete the Job and wait for its pods, but do not record
   * `sourceHash` on the PVC as the weights it holds. */
  releaseVolume(input: ModelInput & { jobName: string; sourceHash: string; abandon?: boolean }): Promise<void>;
  /**
   * `admissionLimit`: with `spec.slo.admission`, the limit the sidecar's configuration starts with (unset: none);
   * `scaling`: the policy the Deployment carries for the worker's autoscaler; `shares`: with `spec.front`, the
   * revisions it sends requests to (unset: `r1` alone).
   */
  applyEngine(
    input: ObjectsInput & {
      replicas?: number;
      admissionLimit?: number;
      scaling?: ScalingPolicy;
      shares?: RevisionShare[];
    },
  ): Promise<{ generation: number }>;
  awaitRollout(input: ModelInput & { generation: number }): Promise<RolloutResult>;
  awaitHealth(input: ModelInput): Promise<HealthResult>;
  scaleEngine(input: ModelInput & { replicas: number }): Promise<void>;
  /** The look of runs from before `lookAtModel` (kept so they replay). */
  readStatus(input: ReadStatusInput): Promise<ObservedStatus>;
  /** A rollout: the front with `shares`, applied and rolled (docs/design/rollout.md, section 3). */
  shiftTraffic(input: ObjectsInput & { shares: RevisionShare[] }): Promise<{ frontPods: number }>;
  /** A rollout: the engine of the revision in `slot` taken away (its volume kept with `keepVolume`). */
  retireRevision(input: ModelInput & { slot: Slot; keepVolume: boolean }): Promise<{ deleted: string[] }>;
  lookAtModel(input: LookInput): Promise<LookResult>;
  tearDown(input: ModelInput): Promise<TeardownResult>;
  /** Puts the files of `engine.lora.adapters` on the volume (one Job), removing those no longer listed. */
  fetchAdapters(input: ObjectsInput): Promise<AdapterFilesResult>;
  /** Makes every ready replica's loaded LoRA adapters equal `engine.lora.adapters` (their files already on the volume). */
  syncAdapters(input: ModelInput): Promise<AdapterSyncResult>;
  /** Finds the highest concurrency at which one ready replica meets `spec.slo`, by streaming requests to it. */
  measureBaseline(input: ModelInput): Promise<BaselineMeasurement>;
  /** Sets the admission sidecar's limit to `maxConcurrency` (unset: none), in place: no rollout. */
  applyAdmission(input: ModelInput & { rootUid: string; maxConcurrency?: number }): Promise<void>;
  /**
   * Refuses (`Forbidden`, not retried) a tenant's document that its grant does not allow as this cluster is now: the
   * Secrets and PVCs the grant allows by their labels. A tenant's ensure runs it on the model's cluster before the
   * model is started or changed; a worker without a tenants file refuses every tenant.
   */
  checkTenantGrant(input: { tenant: string; document: unknown }): Promise<void>;
  /**
   * A server-side dry run: the document checked by this worker (its parser, what it checks before it serves a model)
   * and each object dry-run applied by the API server. Nothing is created; refusals are returned, not thrown.
   */
  dryRunModel(input: DryRunInput): Promise<DryRunResult>;
  /**
   * Placement at start (docs/design/fleet.md, §3): this cluster's free GPUs, node by node: each Ready, schedulable
   * node's allocatable `resource` less what the pods bound to it that have not ended ask for. Two list requests.
   */
  clusterCapacity(input: ClusterCapacityInput): Promise<CapacityReading>;
}

export interface DryRunInput {
  /** The ServedModel document, parsed by the worker's own rules. */
  document: unknown;
}

/** One object of a dry run: what the API server would persist, or why it would not. */
export interface DryRunObject {
  kind: string;
  name: string;
  /** The API server's dry-run answer, without `metadata.managedFields`; absent when the object is refused. */
  object?: Record<string, unknown>;
  /** Why the object would not be created: the API server's refusal, or the worker's own (a name someone else owns). */
  refusal?: string;
}

export interface DryRunResult {
  /** The document's problems by the worker's parser; when there are any, nothing else was checked. */
  issues: SpecIssue[];
  /** Every object the model would own, in the order the lifecycle creates them. */
  objects: DryRunObject[];
}
