// A served model's state as the steps see it (their StepContext): the status and every change to it made known —
// search attributes, the parent workflow, Web UI details, Kubernetes Events — and the step runner with its retries.
import {
  ActivityFailure,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  proxySinks,
  setCurrentDetails,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { onVersionedWorker } from './pinned.js';
import { backoffMs, type ResolvedOptions } from './activity-options.js';
import {
  failure,
  FAILURE,
  ferryPhaseKey,
  modelRefOf,
  phaseChangedSignal,
  searchAttributesFor,
  type CarriedState,
  type FerrySinks,
  type ModelStatus,
  type ServedModel,
  type Step,
} from './contract/index.js';
import { specAccepted, statusEvents } from './status/events.js';
import { classifyFailure, type Budgets } from './status/failure.js';
import { summarizeStatus } from './status/summary.js';
import { withUsage } from './status/usage.js';
import { beginStep, failStep, finishStep, retryingStep } from './status/transitions.js';
import { now, type StepContext, type World } from './steps/context.js';
import { RolloutControl } from './steps/rollout-control.js';

/** The worker's side of status changes: log lines, metrics, Kubernetes Events (contract/model-events.ts). */
const { ferry: worker } = proxySinks<FerrySinks>();

function worldOf(state: CarriedState | undefined): World {
  if (!state) return { engineApplied: false };
  const { status: _status, attemptedGeneration: _attempted, ...world } = state;
  return world;
}

export function budgetsOf(spec: ServedModel): Budgets {
  return { pullerDeadline: spec.spec.puller.deadline, startupTimeout: spec.spec.engine.startupTimeout };
}

export class ModelState implements StepContext {
  readonly world: World;
  readonly rollout = new RolloutControl();
  /** The spec the running reconcile works towards (an update may already have replaced `desired`). */
  protected reconciling: ServedModel | undefined;

  constructor(
    /** The latest accepted spec. */
    public desired: ServedModel,
    public status: ModelStatus,
    state: CarriedState | undefined,
    readonly options: ResolvedOptions,
  ) {
    this.world = worldOf(state);
  }

  /**
   * Search attributes and Web UI details of a run that has just started. A run continued as new on a versioned worker
   * has its search attributes from the run before (continue-as-new copies them) and replays only on this code: it
   * writes none.
   */
  publish(continued: boolean): void {
    if (!(continued && onVersionedWorker())) {
      upsertSearchAttributes(searchAttributesFor(modelRefOf(this.desired), this.status.phase));
    }
    setCurrentDetails(summarizeStatus(this.status));
    // The start's spec, told once (a sink: no history); later ones are told as they are accepted (statusEvents).
    if (!continued) worker.modelEvents(modelRefOf(this.desired), [specAccepted(this.status)]);
  }

  set(next: ModelStatus): void {
    const previous = this.status;
    next = withUsage(previous, next, this.desired.spec.resources.gpus, now());
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

  async step<T>(
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
}
