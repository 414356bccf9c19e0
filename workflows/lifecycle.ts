// The state of one served model and the sequence of its steps: reconcile, idle (watch.ts), tear down. Each step's
// row, orchestration and patches live in steps/<step>.ts; this file runs them in order and is their StepContext.
// The workflow function in serve-model.ts owns one of these, wires its handlers to it, and runs its main loop.
import { ApplicationFailure, condition, isCancellation, log, workflowInfo } from '@temporalio/workflow';
import { patchedUnlessPinned } from './pinned.js';
import { ActivityIds, activitiesFor, type Naming, type ResolvedOptions } from './activity-options.js';
import {
  describeRef,
  describeSource,
  failure,
  FAILURE,
  INVALID_SPEC,
  MODEL_DELETING,
  sameSource,
  specChanges,
  type AwaitPhaseInput,
  type DeleteModelInput,
  type DeleteResult,
  type FinalStatus,
  type LookResult,
  type ModelChanged,
  type ModelStatus,
  type ScaleDecision,
  type ScheduledFloor,
  scheduledFloor,
  type ServedModel,
  type ServeModelInput,
  type StepProgress,
  type UpdateModelInput,
  type UpdateResult,
} from './contract/index.js';
import { budgetsOf, ModelState } from './model-state.js';
import { adapterProblem } from './status/adapters.js';
import { currentStep, trimTimeline } from './status/timeline.js';
import {
  acceptSpec,
  askedBy,
  beginTeardown,
  byWhom,
  beginUpdate,
  foldProgress,
  initialStatus,
  markReady,
  observe,
  SETTLED,
  supersede,
} from './status/transitions.js';
import { adaptersStep } from './steps/adapters.js';
import { admissionLimit, baselineStep } from './steps/baseline.js';
import { claim } from './steps/claim.js';
import { now, slotOf } from './steps/context.js';
import { pullWeights } from './steps/download.js';
import { awaitHealth } from './steps/health.js';
import { look, readStatus } from './steps/look.js';
import { applyMeasuredTarget, readyWithoutEngine, rollOut } from './steps/rollout.js';
import { abandonCandidate, rollOutRevision, rolloutFor, type Serving } from './steps/shift.js';
import { numberRevision } from './steps/rollout-control.js';
import { applyDecision, decisionRefusal, engineReplicas, engineScale, scalingStatus, wakeUp } from './steps/scale.js';
import { applyFloor, withSchedule } from './steps/schedule.js';
import { stopEngine } from './steps/stop.js';
import { applyStorage } from './steps/storage.js';
import { tearDown } from './steps/teardown.js';
import { acceptedUpdateSpec, checkUpdateSpec } from './update-spec.js';
import { PhaseWaits } from './phase-waits.js';
import { Watch } from './watch.js';
import { Interruptible } from './interruptible.js';

/**
 * Runs with this patch name their activities after what they are for (`ActivityIds`, activity-options.ts), space
 * looks woken back to back inside the look (`LookInput.delayMs`) rather than with a timer, and keep a Degraded
 * model's backoff timer across wakes: so a run's commands are the same whether a wake and an update after it are run
 * in one activation or in two (docs/resilience.md, "A wake and an update split by a query").
 */
const SPLIT_SAFE = 'split-activation-safe';
/** A schedule's floor whose apply failed is applied again this much later. */
const FLOOR_RETRY_MS = 60_000;

export class ModelLifecycle extends ModelState {
  /** A delete (or the workflow's cancellation) was asked for; the main loop ends and tears down. */
  deletion: { reason?: string; requestedBy?: string } | undefined;
  /** The generation last reconciled (Ready or Failed); below `status.generation` means work is due. */
  private attempted: number;
  /** The work that an update or a delete interrupts: a reconcile, or a look at the model. */
  private readonly work = new Interruptible();
  private deleted: DeleteResult | undefined;
  /** A look found the root object or the weights volume gone: the whole sequence runs again. */
  private lost: LookResult['lost'];
  /** The revision that serves, once a reconcile made it so: what a rollout goes out beside (steps/shift.ts). */
  private serving: Serving | undefined;
  private readonly watch: Watch;
  /** The schedule's floor, changed and not yet applied; `failed` once applying it did (tried again a minute later). */
  private pendingFloor: { scheduledMin: number | undefined; floor: ScheduledFloor; failed?: boolean } | undefined;
  private readonly waits = new PhaseWaits();
  /** How this run names its activities (the SDK's numbers in runs from before `SPLIT_SAFE`). */
  private readonly ids: ActivityIds;

  constructor(
    spec: ServedModel,
    private readonly input: ServeModelInput,
    options: ResolvedOptions,
  ) {
    super(spec, input.state?.status ?? initialStatus(spec, now(), input), input.state, options);
    this.attempted = input.state?.attemptedGeneration ?? 0;
    // A run continued as new while the model served: its spec is what serves.
    if (input.state && SETTLED.includes(this.status.phase) && this.status.phase !== 'Failed') this.servedBy(spec);
    const splitSafe = patchedUnlessPinned(SPLIT_SAFE);
    this.ids = new ActivityIds(splitSafe);
    this.watch = new Watch(options, splitSafe);
  }

  // --- what the handlers call ---------------------------------------------------------------------------------

  /** The worker's watch saw one of the model's objects change: look at it (when idle). */
  wake(change: ModelChanged): void {
    this.watch.wake(change);
  }

  /** The worker's autoscaler wants another replica count: applied when idle, unless stale or out of bounds. */
  scale(decision: ScaleDecision): void {
    const refusal = decisionRefusal(this.desired, this.world, decision);
    if (refusal || this.deletion) {
      log.info('scale decision dropped', { refusal: refusal ?? 'the model is being deleted', decision });
      return;
    }
    this.world.pendingScale = decision;
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
    this.checkOwner(update.tenant);
    checkUpdateSpec(this.desired, update.spec);
  }

  /** Rejects a tenant's delete of a model it does not own (`validateDelete`). */
  validateDelete(request: DeleteModelInput | undefined): void {
    this.checkOwner(request?.tenant);
  }

  /** A tenant's change to a model it does not own is answered as if no model had that name (docs/security.md). */
  private checkOwner(tenant: string | undefined): void {
    if (tenant !== undefined && tenant !== this.status.tenant) {
      throw failure(FAILURE.ModelNotFound, `${describeRef(this.status)}: no such model`);
    }
  }

  update(update: UpdateModelInput, undoTo?: { revision: string; reason?: string }): UpdateResult {
    const next = acceptedUpdateSpec(this.desired, update.spec);
    const changes = specChanges(this.desired, next);
    const sourceChanged = !sameSource(this.desired.spec.source, next.spec.source);
    const { generation } = this.status;
    numberRevision(this.world, this.desired, next, generation + 1, undoTo);
    // An unchanged document is a no-op, except on a Failed model, where it is how a person asks for a retry.
    if (changes.length === 0 && this.status.phase !== 'Failed') {
      return { accepted: true, generation, changed: false, sourceChanged: false, changes };
    }
    this.desired = next;
    this.set(acceptSpec(this.status, next, generation + 1, now(), update.requestedBy));
    this.work.interrupt();
    return { accepted: true, generation: generation + 1, changed: changes.length > 0, sourceChanged, changes };
  }

  async delete(request: DeleteModelInput | undefined): Promise<DeleteResult> {
    this.requestDelete(request);
    await condition(() => this.deleted !== undefined);
    return this.deleted!;
  }

  /** The main loop ends and tears down; the first delete's reason is kept. */
  requestDelete(request: DeleteModelInput | undefined): void {
    if (!this.deletion && request?.movedTo) this.set({ ...this.status, movedTo: { ...request.movedTo, at: now() } });
    this.deletion ??= { reason: request?.reason, requestedBy: askedBy(request?.requestedBy) };
    this.work.interrupt();
  }

  /**
   * Deletes the model at `spec.expiresAt`: one durable timer, which an update that moves or removes the time replaces;
   * status says when. Runs beside the main loop for the whole run (a run continued as new starts it again).
   */
  async expire(): Promise<void> {
    try {
      await this.expireLoop();
    } catch (err) {
      // A cancelled workflow tears down by itself: its waits end with it.
      if (!isCancellation(err)) throw err;
    }
  }

  private async expireLoop(): Promise<void> {
    while (!this.deletion) {
      const at = this.desired.spec.expiresAt;
      if (this.status.expiresAt !== at) this.set({ ...this.status, expiresAt: at });
      if (at === undefined) {
        await condition(() => this.desired.spec.expiresAt !== undefined || !!this.deletion);
        continue;
      }
      const ms = Date.parse(at) - Date.now();
      if (ms <= 0) {
        this.requestDelete({ reason: `expired (spec.expiresAt ${at})`, requestedBy: 'spec.expiresAt' });
        return;
      }
      await condition(() => this.desired.spec.expiresAt !== at || !!this.deletion, ms);
    }
  }

  /** Keeps `spec.scaling.schedule`'s floor (steps/schedule.ts): one timer until its next change; detached. */
  async keepSchedule(): Promise<void> {
    try {
      while (!this.deletion) {
        const spec = this.desired;
        const scaling = spec.spec.scaling;
        const floor = scheduledFloor(scaling?.minReplicas ?? 0, scaling?.schedule, Date.now());
        const wanted = scaling?.schedule ? floor.minReplicas : undefined;
        // Before the engine's first apply its rollout takes the floor; after, the idle model applies it.
        if (wanted !== this.world.scheduledMin && !this.world.engineApplied) this.world.scheduledMin = wanted;
        if (wanted !== this.world.scheduledMin) this.pendingFloor = { scheduledMin: wanted, floor };
        if (scaling) this.set(withSchedule(this.status, spec, this.world, floor));
        const ms = floor.next ? Math.max(floor.next.at - Date.now(), 1) : undefined;
        const changed = () => this.desired !== spec || !!this.deletion;
        await condition(() => changed() || !!this.pendingFloor?.failed, ms);
        if (this.pendingFloor?.failed) {
          this.pendingFloor = undefined;
          await condition(changed, FLOOR_RETRY_MS);
        }
      }
    } catch (err) {
      if (!isCancellation(err)) throw err;
    }
  }

  /** Resolves with the status once the wait is decided, or when the run closes (phase-waits.ts). */
  awaitPhase(input: AwaitPhaseInput): Promise<ModelStatus> {
    return this.waits.wait(() => this.status, input);
  }

  /** Someone waits for a phase: continue-as-new must first let them go (`close`). */
  get waiting(): boolean {
    return this.waits.waiting;
  }

  /** Called before the run waits for its handlers to finish and ends or continues as new. */
  close(): void {
    this.waits.close();
  }

  // --- what the main loop calls -------------------------------------------------------------------------------

  /** Work is due: an accepted generation not yet tried, or a reconcile that did not settle. */
  get due(): boolean {
    return this.attempted < this.status.generation || !SETTLED.includes(this.status.phase) || !!this.lost;
  }

  historyIsLong(): boolean {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength > this.options.continueAsNewAfterEvents;
  }

  /**
   * The Worker Deployment's current version is no longer the one this run is pinned to: it moves there at its next idle
   * moment (serve-model.ts). Always false on an unversioned worker.
   */
  get versionChanged(): boolean {
    return workflowInfo().targetWorkerDeploymentVersionChanged;
  }

  /** The next run's input. */
  carryOver(): ServeModelInput {
    return {
      version: 1,
      spec: this.desired,
      options: this.input.options,
      ...(this.input.tenant !== undefined ? { tenant: this.input.tenant } : {}),
      state: { ...this.world, status: trimTimeline(this.status), attemptedGeneration: this.attempted },
    };
  }

  /** Waits for an update or a delete, looking at the model meanwhile (watch.ts). */
  async idle(): Promise<void> {
    const due = () => this.deletion !== undefined || this.attempted < this.status.generation || this.versionChanged;
    const acts = () => activitiesFor(this.desired, this.options, this.naming(this.status.generation));
    const floor = this.pendingFloor;
    if (floor && !floor.failed && !due() && this.status.phase === 'Failed') {
      // Nothing is applied to a Failed model: the reconcile that fixes it takes the floor in force then.
      this.pendingFloor = undefined;
      this.world.scheduledMin = floor.scheduledMin;
      this.set(withSchedule(this.status, this.desired, this.world, floor.floor));
    } else if (floor && !floor.failed && !due()) {
      let applied = false;
      await this.work.run(async () => {
        applied = await applyFloor(this, acts(), floor.scheduledMin, floor.floor);
        if (applied) await wakeUp(this, acts());
      });
      if (this.pendingFloor === floor) this.pendingFloor = applied ? undefined : { ...floor, failed: true };
      return;
    }
    const decision = this.world.pendingScale;
    if (decision && !due()) {
      this.world.pendingScale = undefined;
      // Decided against the count then in force; an update since may have moved it.
      if (decisionRefusal(this.desired, this.world, decision) === undefined) {
        await this.work.run(async () => {
          await applyDecision(this, acts(), decision);
          await wakeUp(this, acts());
        });
      }
      return;
    }
    const scaling = () =>
      due() || this.world.pendingScale !== undefined || (!!this.pendingFloor && !this.pendingFloor.failed);
    await this.watch.idle(this.status.phase, scaling, {
      look: async (delayMs) => {
        await this.work.run(async () => {
          const lost = await look(this, acts(), delayMs);
          if (lost) this.lost = lost;
        });
      },
      readStatus: async () => {
        await this.work.run(() => readStatus(this, acts()));
      },
    });
  }

  /** Reconciles the latest generation; an update or a delete that arrives meanwhile supersedes it. */
  async reconcileLatest(): Promise<void> {
    const { generation } = this.status;
    const spec = this.desired;
    this.attempted = generation;
    try {
      const completed = await this.work.run(() => this.reconcile(spec, generation));
      if (completed) this.watch.forgetWakes();
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
    this.set(beginTeardown(this.status, reason, now(), this.deletion?.requestedBy));
    const acts = activitiesFor(this.desired, this.options, this.naming(this.status.generation));
    const { result, attempts } = await tearDown(this, acts, budgetsOf(this.desired));
    this.deleted = { ...result, reason, attempts };
    return this.deleted;
  }

  /** The workflow's result once the model is deleted. */
  final(result: DeleteResult): FinalStatus {
    return {
      status: this.status,
      teardown: { deleted: result.deleted, retained: result.retained },
      reason: result.reason,
    };
  }

  // --- the sequence ------------------------------------------------------------------------------------------

  /** Brings the cluster to `spec`: the whole sequence for new weights, the engine alone for anything else. */
  private async reconcile(spec: ServedModel, generation: number): Promise<void> {
    this.reconciling = spec;
    const acts = activitiesFor(spec, this.options, this.naming(generation));
    const { world } = this;
    const lost = this.lost;
    if (lost) {
      // Root object or volume gone: all is made again, from a stopped engine (it holds the dying volume till it goes).
      world.rootUid = undefined;
      world.volumeSource = undefined;
      world.appliedStorage = undefined;
    }
    if (world.candidate) await abandonCandidate(this, acts, spec, generation); // a rollout this update cut short
    const serving = lost ? undefined : this.serving;
    if (serving && rolloutFor(spec, serving, world)) {
      // Rolled back, the revision before serves, and its spec is the one in force (the same document tries again).
      if ((await rollOutRevision(this, acts, spec, generation, serving)) === 'aborted') this.desired = serving.spec;
      else this.servedBy(spec);
      return;
    }
    this.serving = undefined;
    const newWeights = !world.volumeSource || !sameSource(world.volumeSource, spec.spec.source) || !world.rootUid;
    if (lost) {
      this.set(beginUpdate(this.status, generation, now(), `generation ${generation}: rebuild (${lost.message})`));
      if (world.engineApplied) {
        await stopEngine(this, acts, spec, generation, world.slot);
        // Stopped: the download need not stop it again, unless the claim finds the Deployment still there.
        world.engineApplied = false;
      }
      this.lost = undefined;
    } else if (this.status.observedGeneration > 0 || generation > 1) {
      const how = newWeights ? `new weights ${describeSource(spec.spec.source)}` : 'in place';
      const by = byWhom(this.status.requestedBy);
      this.set(beginUpdate(this.status, generation, now(), `generation ${generation}: ${how}${by}`));
    }
    const sourceHash = newWeights ? await claim(this, acts, spec, generation) : world.sourceHash!;
    const objects = { model: spec, rootUid: world.rootUid!, sourceHash, ...slotOf(world) };
    const storage = await applyStorage(this, acts, objects, newWeights, generation);
    if (newWeights) {
      await pullWeights(this, acts, objects, storage, generation);
      world.volumeSource = spec.spec.source;
      world.sourceHash = sourceHash;
    }
    if (!spec.spec.scaling) world.scaledReplicas = world.scheduledMin = undefined;
    this.set(scalingStatus(this.status, spec, world));
    const scale = engineScale(this.status, spec, world);
    const rollout = await rollOut(this, acts, objects, { ...admissionLimit(this.status, spec), ...scale }, generation);
    if (engineReplicas(spec, world) === 0) return readyWithoutEngine(this, generation);
    const health = await awaitHealth(this, acts, spec, generation, world.slot);
    const ready = { generation, endpoint: health.endpoint, readyReplicas: rollout.readyReplicas };
    const managed = spec.spec.engine.lora.adapters !== undefined;
    if (!managed && this.status.adapters) this.set({ ...this.status, adapters: undefined });
    if (managed) await adaptersStep(this, acts, objects, generation);
    await baselineStep(this, acts, objects, generation);
    await applyMeasuredTarget(this, acts, objects, scale);
    this.set(markReady(this.status, ready, now()));
    this.servedBy(spec);
    // The base serves; an adapter that is not on every ready replica keeps the model from Ready.
    const problem = adapterProblem(this.status.adapters);
    if (problem)
      this.set(
        observe(
          this.status,
          { replicas: engineReplicas(spec, world), readyReplicas: rollout.readyReplicas, problem },
          now(),
        ),
      );
  }

  // --- plumbing ----------------------------------------------------------------------------------------------

  private servedBy(spec: ServedModel): void {
    this.serving = { spec, revision: this.status.revision ?? 'r1', slot: this.world.slot ?? 'a' };
  }

  /** Names the activities of work on `generation` (see `ActivityIds`). */
  private naming(generation: number): Naming {
    return { ids: this.ids, generation };
  }
}
