// One served model for its whole life: claim → storage → pull → release → engine → rollout → health → Ready, then
// watch it, apply updates, and tear it all down when deleted or cancelled.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
  type RetryPolicy,
} from '@temporalio/workflow';
import { type CarriedState, deleteModelUpdate, type DeleteResult, describeSource, failure, type FerryActivities, ferryPhaseKey, type FinalStatus, formatSpecIssues, INVALID_SPEC, MODEL_DELETING, modelRefOf, type ModelStatus, NON_RETRYABLE, parseDuration, type PendingPull, phaseChangedSignal, progressSignal, safeParseServedModel, sameJson, sameSource, searchAttributesFor, type ServedModel, type ServeModelInput, type ServeModelOptions, specChanges, SpecError, specForUpdate, specQuery, statusQuery, type StorageResult, type TeardownResult, UNSUPPORTED_INPUT, type UpdateModelInput, updateModelUpdate, type UpdateResult } from './contract';
import { classifyFailure, type Budgets } from './status/failure';
import { summarizeStatus } from './status/summary';
import { currentStep, skipStep, trimTimeline, type Step } from './status/timeline';
import {
  acceptSpec,
  beginStep,
  beginTeardown,
  beginUpdate,
  failStep,
  finishStep,
  finishTeardown,
  foldProgress,
  initialStatus,
  markReady,
  observe,
  retryingStep,
  SETTLED,
  skipDownload,
  supersede,
} from './status/transitions';

/** Failure type the workflow uses internally to unwind a reconcile that ended in phase Failed. */
const RECONCILE_FAILED = 'ReconcileFailed';
/** How long any one short step (an apply, a delete, a look) may take. */
const SHORT_STEP_TIMEOUT_MS = 2 * 60_000;
const TEARDOWN_TIMEOUT_MS = 5 * 60_000;

interface ResolvedOptions {
  watchIntervalMs: number;
  continueAsNewAfterEvents: number;
  initialIntervalMs: number;
  maximumIntervalMs: number;
  maximumAttempts: number;
  timeoutMarginMs: number;
  heartbeatTimeoutMs: number;
}

function resolveOptions(options: ServeModelOptions = {}): ResolvedOptions {
  return {
    watchIntervalMs: options.watchIntervalMs ?? 30_000,
    continueAsNewAfterEvents: options.continueAsNewAfterEvents ?? 5_000,
    initialIntervalMs: options.retry?.initialIntervalMs ?? 1_000,
    maximumIntervalMs: options.retry?.maximumIntervalMs ?? 30_000,
    maximumAttempts: options.retry?.maximumAttempts ?? 10,
    timeoutMarginMs: options.timeoutMarginMs ?? 5 * 60_000,
    heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 60_000,
  };
}

/** The activities with the timeouts of each kind of step; long waits get their budget from the spec. */
function activitiesFor(spec: ServedModel, options: ResolvedOptions) {
  const retry: RetryPolicy = {
    initialInterval: options.initialIntervalMs,
    backoffCoefficient: 2,
    maximumInterval: options.maximumIntervalMs,
    maximumAttempts: options.maximumAttempts,
    nonRetryableErrorTypes: [...NON_RETRYABLE],
  };
  // A long wait retries (a worker restart, a lost heartbeat) for as long as its budget lasts, and no longer.
  const { maximumAttempts: _bounded, ...unbounded } = retry;
  const longWait = (budgetMs: number): ActivityOptions => ({
    startToCloseTimeout: budgetMs,
    scheduleToCloseTimeout: budgetMs,
    heartbeatTimeout: options.heartbeatTimeoutMs,
    retry: unbounded,
  });
  return {
    short: proxyActivities<FerryActivities>({ startToCloseTimeout: SHORT_STEP_TIMEOUT_MS, retry }),
    puller: proxyActivities<FerryActivities>(
      longWait(parseDuration(spec.spec.puller.deadline) + options.timeoutMarginMs),
    ),
    startup: proxyActivities<FerryActivities>(
      longWait(parseDuration(spec.spec.engine.startupTimeout) + options.timeoutMarginMs),
    ),
    // One attempt per call: the workflow retries teardown itself, so each failure shows in status.
    teardown: proxyActivities<FerryActivities>({
      startToCloseTimeout: TEARDOWN_TIMEOUT_MS,
      retry: { ...retry, maximumAttempts: 1 },
    }),
  };
}

function budgetsOf(spec: ServedModel): Budgets {
  return { pullerDeadline: spec.spec.puller.deadline, startupTimeout: spec.spec.engine.startupTimeout };
}

function now(): string {
  return new Date().toISOString();
}

function backoffMs(attempt: number, options: ResolvedOptions): number {
  return Math.min(options.initialIntervalMs * 2 ** Math.min(attempt - 1, 20), options.maximumIntervalMs);
}

/** Where the model's objects stand in the cluster; carried over by continue-as-new. */
type World = Omit<CarriedState, 'status' | 'attemptedGeneration'>;

function worldOf(state: CarriedState | undefined): World {
  if (!state) return { engineApplied: false };
  const { status: _status, attemptedGeneration: _attempted, ...world } = state;
  return world;
}

export async function ServeModelWorkflow(input: ServeModelInput): Promise<FinalStatus> {
  if (input?.version !== 1) {
    throw failure(UNSUPPORTED_INPUT, `ServeModelWorkflow takes input version 1, got ${JSON.stringify(input?.version)}`);
  }
  // Parsed by the client already (parsing is idempotent); checked again for starts that bypass it.
  const parsed = safeParseServedModel(input.spec);
  if (!parsed.ok) {
    throw failure(INVALID_SPEC, formatSpecIssues(parsed.issues), parsed.issues);
  }
  const options = resolveOptions(input.options);
  const ref = modelRefOf(parsed.model);
  let desired = parsed.model;
  let status: ModelStatus = input.state?.status ?? initialStatus(desired, now());
  let attempted = input.state?.attemptedGeneration ?? 0;
  const world = worldOf(input.state);

  /** The work that an update or a delete interrupts: a reconcile, or a look at the model. */
  let active: CancellationScope | undefined;
  let deletion: { reason?: string } | undefined;
  let deleted: DeleteResult | undefined;
  /** The spec the running reconcile works towards (an update may already have replaced `desired`). */
  let reconciling: ServedModel | undefined;

  function set(next: ModelStatus): void {
    const previous = status.phase;
    status = next;
    if (next.phase !== previous) {
      upsertSearchAttributes([{ key: ferryPhaseKey, value: next.phase }]);
      notifyParent();
    }
    setCurrentDetails(summarizeStatus(status));
  }

  function notifyParent(): void {
    const parent = workflowInfo().parent;
    if (!parent) return;
    const { phase, generation, observedGeneration, endpoint, lastError } = status;
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

  // --- messages -------------------------------------------------------------------------------------------------

  setHandler(statusQuery, () => status);
  setHandler(specQuery, () => desired);

  setHandler(progressSignal, (progress) => set(foldProgress(status, progress, currentStep(status), now())));

  setHandler(
    updateModelUpdate,
    (update): UpdateResult => {
      const next = specForUpdate(desired, update.spec);
      const changes = specChanges(desired, next);
      const sourceChanged = !sameSource(desired.spec.source, next.spec.source);
      // An unchanged document is a no-op, except on a Failed model, where it is how a person asks for a retry.
      if (changes.length === 0 && status.phase !== 'Failed') {
        return { accepted: true, generation: status.generation, changed: false, sourceChanged: false, changes };
      }
      desired = next;
      set(acceptSpec(status, next, status.generation + 1, now()));
      active?.cancel();
      return { accepted: true, generation: status.generation, changed: changes.length > 0, sourceChanged, changes };
    },
    {
      validator: validateUpdate,
      description: 'Change the spec; rejected with field-level errors, reconciled afterwards',
    },
  );

  function validateUpdate(update: UpdateModelInput): void {
    if (deletion) {
      throw failure(MODEL_DELETING, 'the model is being deleted');
    }
    if (typeof update !== 'object' || update === null || !('spec' in update)) {
      throw failure(INVALID_SPEC, 'the update needs { spec: <ServedModel document> }');
    }
    try {
      specForUpdate(desired, update.spec);
    } catch (err) {
      if (err instanceof SpecError) {
        throw failure(INVALID_SPEC, err.message, err.issues);
      }
      throw err;
    }
  }

  setHandler(
    deleteModelUpdate,
    async (request): Promise<DeleteResult> => {
      deletion ??= { reason: request?.reason };
      active?.cancel();
      await condition(() => deleted !== undefined);
      return deleted!;
    },
    { description: 'Tear the model down; returns what was deleted and retained' },
  );

  // --- lifecycle ------------------------------------------------------------------------------------------------

  upsertSearchAttributes(searchAttributesFor(ref, status.phase));
  setCurrentDetails(summarizeStatus(status));

  try {
    await serve();
  } catch (err) {
    if (isCancellation(err) && CancellationScope.current().consideredCancelled) {
      deletion ??= { reason: 'workflow cancelled' };
      await CancellationScope.nonCancellable(async () => {
        await tearDown();
        await condition(allHandlersFinished);
      });
    }
    throw err;
  }
  return await CancellationScope.nonCancellable(async () => {
    const result = await tearDown();
    await condition(allHandlersFinished);
    return { status, teardown: { deleted: result.deleted, retained: result.retained }, reason: result.reason };
  });

  /** Reconciles and watches until a delete arrives; continues as new when history grows long. */
  async function serve(): Promise<void> {
    while (!deletion) {
      if (attempted < status.generation || !SETTLED.includes(status.phase)) {
        await reconcileLatest();
        continue;
      }
      if (historyIsLong() && allHandlersFinished()) {
        await condition(allHandlersFinished);
        await continueAsNew<typeof ServeModelWorkflow>({
          version: 1,
          spec: desired,
          options: input.options,
          state: { ...world, status: trimTimeline(status), attemptedGeneration: attempted },
        });
      }
      const due = () => deletion !== undefined || attempted < status.generation;
      if (status.phase === 'Failed') {
        await condition(due);
      } else if (!(await condition(due, options.watchIntervalMs))) {
        await watch();
      }
    }
  }

  function historyIsLong(): boolean {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength > options.continueAsNewAfterEvents;
  }

  /** Runs `body` in a scope that an update or a delete cancels; false when it was cancelled that way. */
  async function interruptible(body: () => Promise<void>): Promise<boolean> {
    const scope = new CancellationScope();
    active = scope;
    try {
      await scope.run(body);
      return true;
    } catch (err) {
      if (isCancellation(err) && scope.consideredCancelled && !CancellationScope.current().consideredCancelled)
        return false;
      throw err;
    } finally {
      active = undefined;
    }
  }

  async function reconcileLatest(): Promise<void> {
    const generation = status.generation;
    const spec = desired;
    attempted = generation;
    try {
      const completed = await interruptible(() => reconcile(spec, generation));
      if (!completed) {
        const why = deletion ? 'cancelled by delete' : `superseded by generation ${status.generation}`;
        set(supersede(status, now(), why));
      }
    } catch (err) {
      // The step already put the model in phase Failed; it waits for an update or a delete.
      if (err instanceof ApplicationFailure && err.type === RECONCILE_FAILED) return;
      throw err;
    }
  }

  /** Brings the cluster to `spec`: the whole sequence for new weights, the engine alone for anything else. */
  async function reconcile(spec: ServedModel, generation: number): Promise<void> {
    reconciling = spec;
    const acts = activitiesFor(spec, options);
    const model = { model: spec };
    const newWeights = !world.volumeSource || !sameSource(world.volumeSource, spec.spec.source) || !world.rootUid;
    if (status.observedGeneration > 0 || generation > 1) {
      const how = newWeights ? `new weights ${describeSource(spec.spec.source)}` : 'in place';
      set(beginUpdate(status, generation, now(), `generation ${generation}: ${how}`));
    }

    let sourceHash = world.sourceHash;
    if (newWeights) {
      const claim = await step(
        'claim',
        generation,
        () => acts.short.claimName(model),
        (r) => (r.resumed.length > 0 ? `resumed ${r.resumed.join(', ')}` : undefined),
      );
      world.rootUid = claim.rootUid;
      sourceHash = claim.sourceHash;
      if (claim.resumed.some((object) => object.startsWith('Deployment/'))) world.engineApplied = true;
      set({ ...status, sourceHash });
    }
    const objects = { model: spec, rootUid: world.rootUid!, sourceHash: sourceHash! };

    let storage: StorageResult | undefined;
    const storageKey = { storage: spec.spec.storage, labels: spec.metadata.labels };
    if (newWeights || !sameJson(world.appliedStorage, storageKey)) {
      storage = await step(
        'storage',
        generation,
        () => acts.short.applyStorage(objects),
        (r) => `${r.pvcName} ${r.phase}${r.holdsSource ? ', holds the weights' : ''}`,
      );
      world.appliedStorage = storageKey;
    }

    if (newWeights) {
      const pending = world.pendingPull;
      if (pending && (pending.sourceHash !== sourceHash || pending.failed || storage?.holdsSource)) {
        // A puller of other weights (or a failed one) must not keep the volume; its download is abandoned.
        await step(
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
        set(skipDownload(status, generation, now(), `the volume already holds ${describeSource(spec.spec.source)}`));
      } else {
        if (world.engineApplied) {
          // ReadWriteOnce: the engine's pod must let go of the volume before the puller can mount it.
          await step(
            'stop',
            generation,
            () => acts.short.scaleEngine({ model: spec, replicas: 0 }),
            () => 'scaled to 0',
          );
        }
        const pulled = await step(
          'download',
          generation,
          async () => {
            const { jobName } = await acts.short.startPuller(objects);
            const pull: PendingPull = { jobName, sourceHash: sourceHash!, failed: false };
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
        await step('release', generation, () =>
          acts.short.releaseVolume({ model: spec, jobName: pulled.jobName, sourceHash: sourceHash! }),
        );
        world.pendingPull = undefined;
      }
      world.volumeSource = spec.spec.source;
      world.sourceHash = sourceHash;
    }

    // Set before the call: a cancelled applyEngine may still have created the Deployment.
    world.engineApplied = true;
    const rollout = await step(
      'rollout',
      generation,
      async () => {
        const applied = await acts.short.applyEngine(objects);
        return await acts.startup.awaitRollout({ model: spec, generation: applied.generation });
      },
      (r) => `revision ${r.generation}: ${r.readyReplicas} ready`,
    );

    if (spec.spec.replicas === 0) {
      set(skipStep(status, 'startup', generation, now(), 'replicas is 0'));
      set(markReady(status, { generation, readyReplicas: 0 }, now()));
      return;
    }
    const health = await step(
      'startup',
      generation,
      () => acts.startup.awaitHealth(model),
      (r) => (r.models.length ? `${r.endpoint} serves ${r.models.join(', ')}` : `${r.endpoint} answers /health; ${r.note ?? 'no model list'}`),
    );
    set(markReady(status, { generation, endpoint: health.endpoint, readyReplicas: rollout.readyReplicas }, now()));
  }

  /**
   * Runs one step: recorded in the timeline and conditions; a transient failure (activity retries exhausted) shows
   * as lastError and the step is tried again after a backoff; anything else ends the reconcile in phase Failed.
   */
  async function step<T>(
    name: Step,
    generation: number,
    run: () => Promise<T>,
    describe?: (result: T) => string | undefined,
  ): Promise<T> {
    set(beginStep(status, name, generation, now()));
    const budgets = budgetsOf(reconciling ?? desired);
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await run();
        set(finishStep(status, name, generation, now(), describe?.(result)));
        return result;
      } catch (err) {
        // Anything but an activity's failure is a bug in this code: fail the workflow task until it is fixed.
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        const failed = classifyFailure(err, name, budgets);
        if (!failed.retryable) {
          set(failStep(status, name, failed, generation, now()));
          throw failure(RECONCILE_FAILED, failed.message);
        }
        log.warn(`${name} failed, retrying`, { reason: failed.reason, message: failed.message, attempt });
        set(retryingStep(status, name, failed, attempt, generation, now()));
        await sleep(backoffMs(attempt, options));
      }
    }
  }

  /** One look at a Ready or Degraded model. A failed look changes nothing: the model may be fine. */
  async function watch(): Promise<void> {
    const acts = activitiesFor(desired, options);
    await interruptible(async () => {
      try {
        set(observe(status, await acts.short.readStatus({ model: desired }), now()));
      } catch (err) {
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        log.warn('readStatus failed', { error: String(err.cause ?? err) });
      }
    });
  }

  /** Deletes everything the model owns, retrying until nothing is left; called in a non-cancellable scope. */
  async function tearDown(): Promise<DeleteResult> {
    if (deleted) return deleted;
    const reason = deletion?.reason;
    set(beginTeardown(status, reason, now()));
    const acts = activitiesFor(desired, options);
    const budgets = budgetsOf(desired);
    for (let attempt = 1; ; attempt++) {
      try {
        const result: TeardownResult = await acts.teardown.tearDown({ model: desired });
        set(finishTeardown(status, result, attempt, now()));
        deleted = { ...result, reason, attempts: attempt };
        return deleted;
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        const failed = classifyFailure(err, 'teardown', budgets);
        log.warn('teardown incomplete, retrying', { reason: failed.reason, message: failed.message, attempt });
        set(retryingStep(status, 'teardown', failed, attempt, status.generation, now()));
        await sleep(backoffMs(attempt, options));
      }
    }
  }
}
