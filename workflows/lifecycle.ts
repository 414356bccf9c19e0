// The state of one served model and the work on it: reconcile (the step sequence), watch, tear down. The workflow
// function in serve-model.ts owns one of these, wires its handlers to it, and runs its main loop.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  patched,
  proxySinks,
  setCurrentDetails,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  ActivityIds,
  activitiesFor,
  backoffMs,
  type Activities,
  type Naming,
  type ResolvedOptions,
} from './activity-options.js';
import {
  asAcceptedBefore,
  describeSource,
  failure,
  FAILURE,
  ferryPhaseKey,
  INVALID_SPEC,
  MODEL_DELETING,
  modelRefOf,
  phaseChangedSignal,
  sameJson,
  sameSource,
  searchAttributesFor,
  SpecError,
  specChanges,
  specForUpdate,
  type CarriedState,
  type AwaitPhaseInput,
  type DeleteModelInput,
  type DeleteResult,
  type FerrySinks,
  type FinalStatus,
  type LookResult,
  type ModelChanged,
  type ModelStatus,
  type PendingPull,
  type ServedModel,
  type ServeModelInput,
  type Step,
  type StepProgress,
  type StorageResult,
  type TeardownResult,
  type UpdateModelInput,
  type UpdateResult,
  PHASES,
  waitOutcome,
} from './contract/index.js';
import { withAcceptedDefaults } from './accepted-defaults.js';
import { adapterProblem, adapterStatuses, adaptersForgotten } from './status/adapters.js';
import { baselineKey, baselineOf, baselineSummary } from './status/baseline.js';
import { statusEvents } from './status/events.js';
import { classifyFailure, type Budgets } from './status/failure.js';
import { summarizeStatus } from './status/summary.js';
import { currentStep, skipStep, trimTimeline } from './status/timeline.js';
import {
  acceptSpec,
  beginStep,
  beginTeardown,
  beginUpdate,
  failStep,
  downloadWritten,
  finishStep,
  finishTeardown,
  foldProgress,
  initialStatus,
  markReady,
  observe,
  recordRepair,
  retryingStep,
  SETTLED,
  skipDownload,
  supersede,
} from './status/transitions.js';

/** The worker's side of status changes: log lines, metrics, Kubernetes Events (contract/model-events.ts). */
const { ferry: worker } = proxySinks<FerrySinks>();

/** Where the model's objects stand in the cluster; carried over by continue-as-new. */
type World = Omit<CarriedState, 'status' | 'attemptedGeneration'>;

function worldOf(state: CarriedState | undefined): World {
  if (!state) return { engineApplied: false };
  const { status: _status, attemptedGeneration: _attempted, ...world } = state;
  return world;
}

function budgetsOf(spec: ServedModel): Budgets {
  return { pullerDeadline: spec.spec.puller.deadline, startupTimeout: spec.spec.engine.startupTimeout };
}

function now(): string {
  return new Date().toISOString();
}

/**
 * Runs from before this patch look at a Ready model every watch interval (readStatus, the spec in every call); runs
 * with it wait for the worker's watch to signal a change, look by reference, and repair what drifted.
 */
const WATCH_RECONCILES = 'watch-reconciles';
/**
 * Runs with this patch keep the LoRA adapters a spec lists on every ready replica: after the health check of a
 * reconcile (the `adapters` step), and whenever a look finds engines that do not hold them.
 */
const LORA_ADAPTERS = 'lora-adapters';

/** Runs with this patch measure the load baseline of a model with `spec.slo` before it is Ready (the `baseline` step). */
const LOAD_BASELINE = 'load-baseline';
/** Runs with this patch set the admission sidecar's limit from each measurement (`spec.slo.admission`). */
const ADMISSION = 'admission';
/** A retried baseline step keeps the measurement it has and applies only the admission limit again. */
const ADMISSION_RETRIED_ALONE = 'admission-retried-alone';

/**
 * The limit admission enforces for a baseline: its concurrency; none when nothing met the goal (0) or when the goal
 * held at the measurement's ceiling, where the capacity is not known and a limit would turn away what it can carry.
 */
function admissionLimitOf(baseline: { maxConcurrency: number; capped: boolean }): { maxConcurrency?: number } {
  return baseline.maxConcurrency > 0 && !baseline.capped ? { maxConcurrency: baseline.maxConcurrency } : {};
}
/**
 * Runs with this patch name their activities after what they are for (`ActivityIds`, activity-options.ts), space
 * looks woken back to back inside the look (`LookInput.delayMs`) rather than with a timer, and keep a Degraded
 * model's backoff timer across wakes: so a run's commands are the same whether a wake and an update after it are run
 * in one activation or in two (docs/resilience.md, "A wake and an update split by a query").
 */
const SPLIT_SAFE = 'split-activation-safe';

/** Updates this code is the first to see get the defaults added since (accepted-defaults.ts); replayed ones do not. */
const NEW_DEFAULTS_IN_UPDATE = 'defaults-2026-12-update';

/** Two looks woken back to back are at least this far apart (another controller fighting over a field). */
const MIN_LOOK_SPACING_MS = 1_000;
/** A Degraded model's first look without a wake comes this soon; later ones back off to the watch interval. */
const FIRST_DEGRADED_LOOK_MS = 1_000;

/** A timer that a wake does not cancel: one at a time, `due` once it fired, until that is taken (`forgetFired`). */
class KeptTimer {
  private running = false;
  due = false;

  /** Starts the timer unless one runs; true when it started one. */
  start(ms: number): boolean {
    if (this.running) return false;
    this.running = true;
    void sleep(ms).then(
      () => (this.due = true),
      () => undefined,
    );
    return true;
  }

  /** Forgets a timer that has fired, so the next `start` starts another; one still running is kept. */
  forgetFired(): void {
    if (!this.due) return;
    this.running = false;
    this.due = false;
  }
}

export class ModelLifecycle {
  /** The latest accepted spec. */
  desired: ServedModel;
  status: ModelStatus;
  /** A delete (or the workflow's cancellation) was asked for; the main loop ends and tears down. */
  deletion: { reason?: string } | undefined;
  /** The generation last reconciled (Ready or Failed); below `status.generation` means work is due. */
  private attempted: number;
  private readonly world: World;
  /** The work that an update or a delete interrupts: a reconcile, or a look at the model. */
  private active: CancellationScope | undefined;
  private deleted: DeleteResult | undefined;
  /** The spec the running reconcile works towards (an update may already have replaced `desired`). */
  private reconciling: ServedModel | undefined;
  /** The worker's watch saw the model's objects change since the last look. */
  private woken: ModelChanged | undefined;
  /** A look found the root object or the weights volume gone: the whole sequence runs again. */
  private lost: LookResult['lost'];
  private watchReconciles: boolean | undefined;
  private lastLookAt = 0;
  /** The safety net's look: one timer at a time, kept across wakes (a wake costs no timer of its own). */
  private readonly safetyNet = new KeptTimer();
  /** Looks since the model became Degraded: the next one waits longer. */
  private degradedLooks = 0;
  /** The Degraded backoff's timer in runs with SPLIT_SAFE, kept across wakes like the safety net's. */
  private readonly degradedTimer = new KeptTimer();
  /** `awaitPhase` updates in flight. */
  private waiters = 0;
  /** The run is about to close or continue as new: waits in flight return what they have. */
  private closing = false;
  /** How this run names its activities (the SDK's numbers in runs from before `SPLIT_SAFE`). */
  private readonly ids: ActivityIds;
  private readonly splitSafe: boolean;

  constructor(
    spec: ServedModel,
    private readonly input: ServeModelInput,
    private readonly options: ResolvedOptions,
  ) {
    this.desired = spec;
    this.status = input.state?.status ?? initialStatus(spec, now());
    this.attempted = input.state?.attemptedGeneration ?? 0;
    this.world = worldOf(input.state);
    this.splitSafe = patched(SPLIT_SAFE);
    this.ids = new ActivityIds(this.splitSafe);
  }

  // --- what the handlers call ---------------------------------------------------------------------------------

  /** The worker's watch saw one of the model's objects change: look at it (when idle). */
  wake(change: ModelChanged): void {
    const objects = [...(this.woken?.objects ?? []), ...(change?.objects ?? [])];
    this.woken = { objects: [...new Set(objects)].slice(0, 8) };
  }

  progress(progress: StepProgress): void {
    this.set(foldProgress(this.status, progress, currentStep(this.status), now()));
  }

  /** Rejects an update before it reaches history: the model is being deleted, or the document is invalid. */
  validateUpdate(update: UpdateModelInput): void {
    if (this.deletion) throw failure(MODEL_DELETING, 'the model is being deleted');
    if (typeof update !== 'object' || update === null || !('spec' in update)) {
      throw failure(INVALID_SPEC, 'the update needs { spec: <ServedModel document> }');
    }
    try {
      specForUpdate(this.desired, update.spec);
    } catch (err) {
      if (err instanceof SpecError) throw failure(INVALID_SPEC, err.message, err.issues);
      throw err;
    }
  }

  update(update: UpdateModelInput): UpdateResult {
    const next = this.acceptedSpec(update.spec);
    const changes = specChanges(this.desired, next);
    const sourceChanged = !sameSource(this.desired.spec.source, next.spec.source);
    const { generation } = this.status;
    // An unchanged document is a no-op, except on a Failed model, where it is how a person asks for a retry.
    if (changes.length === 0 && this.status.phase !== 'Failed') {
      return { accepted: true, generation, changed: false, sourceChanged: false, changes };
    }
    this.desired = next;
    this.set(acceptSpec(this.status, next, generation + 1, now()));
    this.active?.cancel();
    return { accepted: true, generation: generation + 1, changed: changes.length > 0, sourceChanged, changes };
  }

  /**
   * The update's spec. The validator has accepted it, so a refusal here is a replay of an update accepted before a
   * rule that now refuses it: it is replayed as it was accepted, or the workflow task would fail on every attempt.
   */
  private acceptedSpec(doc: unknown): ServedModel {
    const isNew = () => patched(NEW_DEFAULTS_IN_UPDATE);
    try {
      return withAcceptedDefaults(doc, specForUpdate(this.desired, doc), isNew);
    } catch (err) {
      if (!(err instanceof SpecError)) throw err;
      log.warn('the update breaks a rule it was accepted without; applying it as it was accepted', {
        issues: err.message,
      });
      return withAcceptedDefaults(
        doc,
        asAcceptedBefore(() => specForUpdate(this.desired, doc)),
        isNew,
      );
    }
  }

  async delete(request: DeleteModelInput | undefined): Promise<DeleteResult> {
    this.deletion ??= { reason: request?.reason };
    this.active?.cancel();
    await condition(() => this.deleted !== undefined);
    return this.deleted!;
  }

  /** Rejects a phase wait that could never be decided before it reaches history. */
  validateAwaitPhase(input: AwaitPhaseInput): void {
    const phases: unknown = input?.phases;
    if (!Array.isArray(phases) || phases.length === 0 || !phases.every((p) => PHASES.includes(p as never))) {
      throw failure(FAILURE.InvalidInput, `awaitPhase needs phases, a non-empty list of ${PHASES.join(', ')}`);
    }
    if (!Number.isInteger(input.generation) || input.generation < 0) {
      throw failure(FAILURE.InvalidInput, 'awaitPhase needs generation, a whole number ≥ 0');
    }
  }

  /** Resolves with the status once the wait is decided, or when the run closes (still pending: ask the next run). */
  async awaitPhase({ phases, generation }: AwaitPhaseInput): Promise<ModelStatus> {
    this.waiters++;
    try {
      await condition(() => this.closing || waitOutcome(this.status, phases, generation) !== 'pending');
    } finally {
      this.waiters--;
    }
    return this.status;
  }

  /** Someone waits for a phase: continue-as-new must first let them go (`close`). */
  get waiting(): boolean {
    return this.waiters > 0;
  }

  /** Called before the run waits for its handlers to finish and ends or continues as new. */
  close(): void {
    this.closing = true;
  }

  // --- what the main loop calls -------------------------------------------------------------------------------

  /** Search attributes and Web UI details of a run that has just started. */
  publish(): void {
    upsertSearchAttributes(searchAttributesFor(modelRefOf(this.desired), this.status.phase));
    setCurrentDetails(summarizeStatus(this.status));
  }

  /** Work is due: an accepted generation not yet tried, or a reconcile that did not settle. */
  get due(): boolean {
    return this.attempted < this.status.generation || !SETTLED.includes(this.status.phase) || !!this.lost;
  }

  historyIsLong(): boolean {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength > this.options.continueAsNewAfterEvents;
  }

  /** The next run's input. */
  carryOver(): ServeModelInput {
    return {
      version: 1,
      spec: this.desired,
      options: this.input.options,
      state: { ...this.world, status: trimTimeline(this.status), attemptedGeneration: this.attempted },
    };
  }

  /**
   * Waits for an update or a delete. Meanwhile a Ready model is looked at when the worker's watch wakes it, and at
   * least every safety-net interval; a Degraded one every watch interval too (it may get well without any object
   * changing); a Failed one not at all.
   */
  async idle(): Promise<void> {
    const due = () => this.deletion !== undefined || this.attempted < this.status.generation;
    if (this.status.phase === 'Failed') {
      await condition(due);
      return;
    }
    this.watchReconciles ??= patched(WATCH_RECONCILES);
    if (!this.watchReconciles) {
      if (!(await condition(due, this.options.watchIntervalMs))) await this.watch();
      return;
    }
    const woken = () => due() || this.woken !== undefined;
    if (this.status.phase === 'Degraded') {
      // Degraded may end without any object changing (an engine that answers /health again): look again soon, then
      // less often — 1 s doubling up to the watch interval.
      const backoff = Math.min(
        FIRST_DEGRADED_LOOK_MS * 2 ** Math.min(this.degradedLooks, 10),
        this.options.watchIntervalMs,
      );
      if (!this.splitSafe) {
        this.degradedLooks++;
        await condition(woken, backoff);
      } else {
        // A wake cancels no timer (SPLIT_SAFE): the backoff's goes on, and the next idle round waits for it again.
        if (this.degradedTimer.start(backoff)) this.degradedLooks++;
        await condition(() => woken() || this.degradedTimer.due);
        this.degradedTimer.forgetFired();
      }
    } else {
      this.degradedTimer.forgetFired();
      this.degradedLooks = 0;
      this.safetyNet.start(this.options.safetyNetIntervalMs);
      await condition(() => woken() || this.safetyNet.due);
    }
    if (due()) return;
    // Woken right after a look: the next one waits a moment, so a fight with another controller stays slow. The look
    // itself waits (no timer that an update could cancel before it is sent: SPLIT_SAFE).
    const wait = this.woken ? this.lastLookAt + MIN_LOOK_SPACING_MS - Date.now() : 0;
    if (wait > 0 && !this.splitSafe && (await condition(due, wait))) return;
    this.safetyNet.forgetFired();
    this.woken = undefined;
    await this.look(this.splitSafe && wait > 0 ? Math.ceil(wait) : 0);
  }

  /** Names the activities of work on `generation` (see `ActivityIds`). */
  private naming(generation: number): Naming {
    return { ids: this.ids, generation };
  }

  /** Reconciles the latest generation; an update or a delete that arrives meanwhile supersedes it. */
  async reconcileLatest(): Promise<void> {
    const { generation } = this.status;
    const spec = this.desired;
    this.attempted = generation;
    try {
      const completed = await this.interruptible(() => this.reconcile(spec, generation));
      // What the watch saw meanwhile was the reconcile's own doing, which it has just waited for.
      if (completed) this.woken = undefined;
      if (!completed) {
        const why = this.deletion ? 'cancelled by delete' : `superseded by generation ${this.status.generation}`;
        this.set(supersede(this.status, now(), why));
      }
    } catch (err) {
      // The step already put the model in phase Failed; it waits for an update or a delete.
      if (err instanceof ApplicationFailure && err.type === FAILURE.ReconcileFailed) return;
      throw err;
    }
  }

  /** Deletes everything the model owns, retrying until nothing is left; called in a non-cancellable scope. */
  async tearDown(): Promise<DeleteResult> {
    if (this.deleted) return this.deleted;
    const reason = this.deletion?.reason;
    this.set(beginTeardown(this.status, reason, now()));
    const acts = activitiesFor(this.desired, this.options, this.naming(this.status.generation));
    const budgets = budgetsOf(this.desired);
    for (let attempt = 1; ; attempt++) {
      try {
        const result: TeardownResult = await acts.teardown.tearDown({ model: this.desired });
        this.set(finishTeardown(this.status, result, attempt, now()));
        this.deleted = { ...result, reason, attempts: attempt };
        return this.deleted;
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        const failed = classifyFailure(err, 'teardown', budgets);
        this.set(retryingStep(this.status, 'teardown', failed, attempt, this.status.generation, now()));
        await sleep(backoffMs(attempt, this.options));
      }
    }
  }

  /** The workflow's result once the model is deleted. */
  final(result: DeleteResult): FinalStatus {
    return {
      status: this.status,
      teardown: { deleted: result.deleted, retained: result.retained },
      reason: result.reason,
    };
  }

  // --- the work ----------------------------------------------------------------------------------------------

  private set(next: ModelStatus): void {
    const previous = this.status;
    this.status = next;
    if (next.phase !== previous.phase) {
      upsertSearchAttributes([{ key: ferryPhaseKey, value: next.phase }]);
      this.notifyParent();
    }
    setCurrentDetails(summarizeStatus(this.status));
    const events = statusEvents(previous, next);
    if (events.length > 0) {
      const { rootUid } = this.world;
      worker.modelEvents({ ...modelRefOf(this.desired), ...(rootUid ? { rootUid } : {}) }, events);
    }
  }

  /** A parent workflow cannot query its child, so the child tells it of every phase change. */
  private notifyParent(): void {
    const parent = workflowInfo().parent;
    if (!parent) return;
    const { phase, generation, observedGeneration, endpoint, lastError } = this.status;
    getExternalWorkflowHandle(parent.workflowId)
      .signal(phaseChangedSignal, {
        workflowId: workflowInfo().workflowId,
        phase,
        generation,
        observedGeneration,
        endpoint,
        lastError,
      })
      .catch((err: unknown) =>
        log.warn('could not tell the parent workflow about a phase change', { error: String(err) }),
      );
  }

  /** Runs `body` in a scope that an update or a delete cancels; false when it was cancelled that way. */
  private async interruptible(body: () => Promise<void>): Promise<boolean> {
    const scope = new CancellationScope();
    this.active = scope;
    try {
      await scope.run(body);
      return true;
    } catch (err) {
      if (isCancellation(err) && scope.consideredCancelled && !CancellationScope.current().consideredCancelled)
        return false;
      throw err;
    } finally {
      this.active = undefined;
    }
  }

  /** Brings the cluster to `spec`: the whole sequence for new weights, the engine alone for anything else. */
  private async reconcile(spec: ServedModel, generation: number): Promise<void> {
    this.reconciling = spec;
    const acts = activitiesFor(spec, this.options, this.naming(generation));
    const { world } = this;
    const lost = this.lost;
    if (lost) {
      // The root object or the volume is gone: everything is made again, starting from a stopped engine (it holds
      // the terminating volume until its pods are gone).
      world.rootUid = undefined;
      world.volumeSource = undefined;
      world.appliedStorage = undefined;
    }
    const newWeights = !world.volumeSource || !sameSource(world.volumeSource, spec.spec.source) || !world.rootUid;
    if (lost) {
      this.set(beginUpdate(this.status, generation, now(), `generation ${generation}: rebuild (${lost.message})`));
      if (world.engineApplied) {
        await this.stopEngine(acts, spec, generation);
        // Stopped: the download need not stop it again, unless the claim finds the Deployment still there.
        world.engineApplied = false;
      }
      this.lost = undefined;
    } else if (this.status.observedGeneration > 0 || generation > 1) {
      const how = newWeights ? `new weights ${describeSource(spec.spec.source)}` : 'in place';
      this.set(beginUpdate(this.status, generation, now(), `generation ${generation}: ${how}`));
    }
    const sourceHash = newWeights ? await this.claim(acts, spec, generation) : world.sourceHash!;
    const objects = { model: spec, rootUid: world.rootUid!, sourceHash };
    const storage = await this.applyStorage(acts, objects, newWeights, generation);
    if (newWeights) {
      await this.pullWeights(acts, objects, storage, generation);
      world.volumeSource = spec.spec.source;
      world.sourceHash = sourceHash;
    }
    await this.rollOut(acts, objects, generation);
  }

  /** Claims the name (resuming our own objects); returns the hash of the source. */
  private async claim(acts: Activities, spec: ServedModel, generation: number): Promise<string> {
    const claim = await this.step(
      'claim',
      generation,
      () => acts.short.claimName({ model: spec }),
      (r) => (r.resumed.length > 0 ? `resumed ${r.resumed.join(', ')}` : undefined),
    );
    this.world.rootUid = claim.rootUid;
    if (claim.resumed.some((object) => object.startsWith('Deployment/'))) this.world.engineApplied = true;
    this.set({ ...this.status, sourceHash: claim.sourceHash });
    return claim.sourceHash;
  }

  /** Applies the PVC for new weights, or when the storage part of the spec (or the labels) changed. */
  private async applyStorage(
    acts: Activities,
    objects: { model: ServedModel; rootUid: string; sourceHash: string },
    newWeights: boolean,
    generation: number,
  ): Promise<StorageResult | undefined> {
    const spec = objects.model;
    const storageKey = { storage: spec.spec.storage, labels: spec.metadata.labels };
    if (!newWeights && sameJson(this.world.appliedStorage, storageKey)) return undefined;
    const storage = await this.step(
      'storage',
      generation,
      () => acts.short.applyStorage(objects),
      (r) => `${r.pvcName} ${r.phase}${r.holdsSource ? ', holds the weights' : ''}`,
    );
    this.world.appliedStorage = storageKey;
    return storage;
  }

  /** Abandons a stale puller, then downloads unless the volume already holds the source, and releases the volume. */
  private async pullWeights(
    acts: Activities,
    objects: { model: ServedModel; rootUid: string; sourceHash: string },
    storage: StorageResult | undefined,
    generation: number,
  ): Promise<void> {
    const { world } = this;
    const { model: spec, sourceHash } = objects;
    const pending = world.pendingPull;
    if (pending && (pending.sourceHash !== sourceHash || pending.failed || storage?.holdsSource)) {
      // A puller of other weights (or a failed one) must not keep the volume; its download is abandoned.
      await this.step(
        'release',
        generation,
        () =>
          acts.short.releaseVolume({
            model: spec,
            jobName: pending.jobName,
            sourceHash: pending.sourceHash,
            abandon: true,
          }),
        () => `abandoned ${pending.jobName}`,
      );
      world.pendingPull = undefined;
    }
    if (storage?.holdsSource) {
      const detail = `the volume already holds ${describeSource(spec.spec.source)}`;
      this.set(skipDownload(this.status, generation, now(), detail));
      return;
    }
    if (world.engineApplied) {
      // ReadWriteOnce: the engine's pod must let go of the volume before the puller can mount it.
      await this.stopEngine(acts, spec, generation);
    }
    const pulled = await this.step(
      'download',
      generation,
      async () => {
        const { jobName } = await acts.short.startPuller(objects);
        const pull: PendingPull = { jobName, sourceHash, failed: false };
        world.pendingPull = pull;
        try {
          return await acts.puller.awaitPuller({ model: spec, jobName });
        } catch (err) {
          if (!isCancellation(err)) pull.failed = true;
          throw err;
        }
      },
      (r) => `${r.jobName} in ${Math.round(r.durationMs / 1000)}s`,
    );
    if (pulled.bytes !== undefined) this.set(downloadWritten(this.status, pulled.bytes, now()));
    await this.step('release', generation, () =>
      acts.short.releaseVolume({ model: spec, jobName: pulled.jobName, sourceHash }),
    );
    world.pendingPull = undefined;
  }

  /** Scales the engine to 0 and waits until its pods are gone (the `stop` step). */
  private async stopEngine(acts: Activities, spec: ServedModel, generation: number): Promise<void> {
    await this.step(
      'stop',
      generation,
      () => acts.short.scaleEngine({ model: spec, replicas: 0 }),
      () => 'scaled to 0',
    );
  }

  /** Applies the engine, waits for its rollout and for a healthy replica of the current revision: Ready. */
  private async rollOut(
    acts: Activities,
    objects: { model: ServedModel; rootUid: string; sourceHash: string },
    generation: number,
  ): Promise<void> {
    const spec = objects.model;
    // Set before the call: a cancelled applyEngine may still have created the Deployment.
    this.world.engineApplied = true;
    const rollout = await this.step(
      'rollout',
      generation,
      async () => {
        const applied = await acts.short.applyEngine({ ...objects, ...this.admissionLimit(spec) });
        return await acts.startup.awaitRollout({ model: spec, generation: applied.generation });
      },
      (r) => `revision ${r.generation}: ${r.readyReplicas} ready`,
    );
    this.world.engineGeneration = rollout.generation;
    if (spec.spec.replicas === 0) {
      // No engine holds an adapter: what the status said of them is of replicas that are gone.
      if (this.status.adapters) this.set({ ...this.status, adapters: undefined });
      this.set(skipStep(this.status, 'startup', generation, now(), 'replicas is 0'));
      this.set(markReady(this.status, { generation, readyReplicas: 0 }, now()));
      return;
    }
    const health = await this.step(
      'startup',
      generation,
      () => acts.startup.awaitHealth({ model: spec }),
      (r) =>
        r.models.length
          ? `${r.endpoint} serves ${r.models.join(', ')}`
          : `${r.endpoint} answers /health; ${r.note ?? 'no model list'}`,
    );
    const ready = { generation, endpoint: health.endpoint, readyReplicas: rollout.readyReplicas };
    const managed = spec.spec.engine.lora.adapters !== undefined;
    if (!managed && this.status.adapters) this.set({ ...this.status, adapters: undefined });
    if (managed && patched(LORA_ADAPTERS)) {
      await this.step(
        'adapters',
        generation,
        () => this.loadAdapters(acts, objects),
        () => adapterSummary(this.status),
      );
    }
    if (spec.spec.slo && patched(LOAD_BASELINE)) await this.measureBaseline(acts, objects, generation);
    this.set(markReady(this.status, ready, now()));
    // The base serves; an adapter that is not on every ready replica keeps the model from Ready.
    const problem = adapterProblem(this.status.adapters);
    if (problem)
      this.set(
        observe(this.status, { replicas: spec.spec.replicas, readyReplicas: rollout.readyReplicas, problem }, now()),
      );
  }

  /**
   * The load baseline, measured again only when something that moves it changed since it was (its key); an update
   * of labels, replicas or adapters keeps it.
   */
  private async measureBaseline(
    acts: Activities,
    objects: { model: ServedModel; rootUid: string },
    generation: number,
  ): Promise<void> {
    const spec = objects.model;
    const kept = this.status.baseline;
    if (kept?.key === baselineKey(spec)) {
      const why = `kept: measured at generation ${kept.generation}, and nothing that moves it changed since`;
      this.set(skipStep(this.status, 'baseline', generation, now(), why));
      return;
    }
    const admit = spec.spec.slo?.admission === true && patched(ADMISSION);
    let done: Awaited<ReturnType<typeof acts.measure.measureBaseline>> | undefined;
    const measured = await this.step(
      'baseline',
      generation,
      async () => {
        // An attempt that failed writing the limit keeps its measurement: minutes of load are not run again for it.
        const result =
          done && patched(ADMISSION_RETRIED_ALONE) ? done : await acts.measure.measureBaseline({ model: spec });
        done = result;
        // The replicas' sidecars admit what one replica was measured to carry, from now on; in place, no rollout.
        if (admit && !result.skipped) {
          await acts.short.applyAdmission({ ...objects, ...admissionLimitOf(result) });
        }
        return result;
      },
      baselineSummary,
    );
    if (!measured.skipped) this.set({ ...this.status, baseline: baselineOf(measured, spec, generation, now()) });
  }

  /** The admission limit a Deployment applied for `spec` starts with: the baseline, while it still holds for it. */
  private admissionLimit(spec: ServedModel): { admissionLimit?: number } {
    const kept = this.status.baseline;
    if (spec.spec.slo?.admission !== true || !kept || kept.key !== baselineKey(spec)) return {};
    const { maxConcurrency } = admissionLimitOf(kept);
    return maxConcurrency !== undefined ? { admissionLimit: maxConcurrency } : {};
  }

  /** Puts the listed adapters' files on the volume and loads them on every ready replica; records their status. */
  private async loadAdapters(
    acts: Activities,
    objects: { model: ServedModel; rootUid: string; sourceHash: string },
  ): Promise<void> {
    const { model } = objects;
    const adapters = model.spec.engine.lora.adapters ?? [];
    const files = await acts.puller.fetchAdapters(objects);
    // Only what is on the volume is loaded: the engines are asked for nothing whose files are not there.
    const missing = new Set(files.failed.map((f) => f.name));
    const lora = { ...model.spec.engine.lora, adapters: adapters.filter((a) => !missing.has(a.name)) };
    const onVolume = { ...model, spec: { ...model.spec, engine: { ...model.spec.engine, lora } } };
    const sync = await acts.short.syncAdapters({ model: onVolume });
    this.world.adapterIncarnations = sync.incarnations;
    const names = adapters.map((a) => a.name);
    this.set({ ...this.status, adapters: adapterStatuses(names, files, sync) });
  }

  /**
   * Runs one step: recorded in the timeline and conditions; a transient failure (activity retries exhausted) shows
   * as lastError and the step is tried again after a backoff; anything else ends the reconcile in phase Failed.
   */
  private async step<T>(
    name: Step,
    generation: number,
    run: () => Promise<T>,
    describe?: (result: T) => string | undefined,
  ): Promise<T> {
    this.set(beginStep(this.status, name, generation, now()));
    const budgets = budgetsOf(this.reconciling ?? this.desired);
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await run();
        this.set(finishStep(this.status, name, generation, now(), describe?.(result)));
        return result;
      } catch (err) {
        // Anything but an activity's failure is a bug in this code: fail the workflow task until it is fixed.
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        const failed = classifyFailure(err, name, budgets);
        if (!failed.retryable) {
          this.set(failStep(this.status, name, failed, generation, now()));
          throw failure(FAILURE.ReconcileFailed, failed.message);
        }
        this.set(retryingStep(this.status, name, failed, attempt, generation, now()));
        await sleep(backoffMs(attempt, this.options));
      }
    }
  }

  /**
   * One look that reconciles: by reference (the activity reads the spec), repairs recorded in the timeline, a lost
   * root object or volume turned into a whole reconcile. A failed look changes nothing: the model may be fine.
   */
  private async look(delayMs: number): Promise<void> {
    const acts = activitiesFor(this.desired, this.options, this.naming(this.status.generation));
    const { rootUid, sourceHash, engineGeneration } = this.world;
    await this.interruptible(async () => {
      try {
        const result = await acts.short.lookAtModel({
          ref: modelRefOf(this.desired),
          generation: this.status.generation,
          rootUid: rootUid!,
          sourceHash: sourceHash!,
          ...(engineGeneration !== undefined ? { engineGeneration } : {}),
          ...this.admissionLimit(this.desired),
          ...(delayMs > 0 ? { delayMs } : {}),
        });
        if (result.engineGeneration !== undefined) this.world.engineGeneration = result.engineGeneration;
        const at = now();
        if (result.lost) {
          this.lost = result.lost;
          const problem = { reason: result.lost.reason, message: result.lost.message };
          this.set(observe(this.status, { ...result, problem }, at));
          return;
        }
        if (!result.incarnations) {
          this.set(observe(recordRepair(this.status, result.repaired, at), result, at));
          return;
        }
        this.set(recordRepair(this.status, result.repaired, at));
        await this.keepAdapters(acts, result);
        // An engine problem wins; else what the adapters lack keeps the model Degraded.
        const problem = result.problem ?? adapterProblem(this.status.adapters);
        this.set(observe(this.status, { ...result, ...(problem ? { problem } : {}) }, now()));
      } catch (err) {
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        log.warn('lookAtModel failed', { error: String(err.cause ?? err) });
      } finally {
        this.lastLookAt = Date.now();
      }
    });
  }

  /**
   * After a look at a model that lists adapters: engines that are new since the adapters were loaded, or adapters
   * still missing (not refused for good), are loaded again, and the status shows the gap while it lasts.
   */
  private async keepAdapters(acts: Activities, look: LookResult): Promise<void> {
    const loadedOn = this.world.adapterIncarnations;
    if (!look.incarnations || loadedOn === undefined || !patched(LORA_ADAPTERS)) return;
    const fresh = look.incarnations.filter((pod) => !loadedOn.includes(pod));
    const missing = (this.status.adapters ?? []).some((a) => a.state === 'Missing');
    if (fresh.length === 0 && !missing && look.incarnations.length === loadedOn.length) return;
    if (fresh.length > 0) {
      const pods = fresh.map((pod) => pod.split('/')[0]!);
      const gap = adaptersForgotten(this.status, pods, look.readyReplicas);
      const problem = adapterProblem(gap.adapters);
      this.set(problem ? observe(gap, { ...look, problem }, now()) : gap);
    }
    const { rootUid, sourceHash } = this.world;
    await this.loadAdapters(acts, { model: this.desired, rootUid: rootUid!, sourceHash: sourceHash! });
  }

  /** One look at a Ready or Degraded model (runs from before WATCH_RECONCILES). A failed look changes nothing. */
  private async watch(): Promise<void> {
    const acts = activitiesFor(this.desired, this.options, this.naming(this.status.generation));
    await this.interruptible(async () => {
      try {
        this.set(observe(this.status, await acts.short.readStatus({ model: this.desired }), now()));
      } catch (err) {
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        log.warn('readStatus failed', { error: String(err.cause ?? err) });
      }
    });
  }
}

/** `2 adapters loaded on 2 replicas` or which are not: the adapters step's timeline detail. */
function adapterSummary(status: ModelStatus): string {
  const adapters = status.adapters ?? [];
  const loaded = adapters.filter((a) => a.state === 'Loaded');
  const replicas = adapters[0]?.readyReplicas ?? 0;
  const rest = adapters.filter((a) => a.state !== 'Loaded').map((a) => `${a.name} ${a.state}`);
  return `${loaded.length} of ${adapters.length} adapters loaded on ${replicas} ${replicas === 1 ? 'replica' : 'replicas'}${rest.length ? `; ${rest.join(', ')}` : ''}`;
}
