// Serving as one step of another team's workflow: ServeModelWorkflow started as a child on Ferry's task queue, its
// phase changes received by signal (a parent cannot query its child), deleted by cancelling it. Workflow code: runs
// on the caller's worker, in the caller's bundle.
import {
  CancellationScope,
  ChildWorkflowCancellationType,
  condition,
  ParentClosePolicy,
  patched,
  setHandler,
  startChild,
} from '@temporalio/workflow';
import {
  asAcceptedBefore,
  failure,
  FAILURE,
  modelRefOf,
  formatSpecIssues,
  safeParseServedModel,
  phaseChangedSignal,
  taskQueueFor,
  workflowIdFor,
  type PhaseChange,
  type ServedModel,
  type ServeModelOptions,
} from '../contract/index.js';
import type { ServeModelWorkflow } from '../serve-model.js';

export interface ServeAsChildOptions {
  /** Ferry's task queue for the model's cluster; default `ferry-<spec.cluster>`. */
  taskQueue?: string;
  /** ServeModelWorkflow's knobs (tests shrink its timings); production leaves them unset. */
  options?: ServeModelOptions;
}

/** A model that is Ready, as its child workflow reported it. */
export interface ReadyModel {
  endpoint: string;
  /** The name clients send as `model` in their requests. */
  servedModelName: string;
  generation: number;
}

export interface ServedModelChild {
  readonly workflowId: string;
  readonly spec: ServedModel;
  /** The latest phase change the child reported, if any yet. */
  readonly latest: PhaseChange | undefined;
  /** Resolves once the model is Ready; rejects with `ServeFailed` when it fails or its workflow ends first. */
  ready(): Promise<ReadyModel>;
  /** Deletes the model: cancels the child, whose teardown runs, and waits until it has finished. Idempotent. */
  delete(): Promise<void>;
}

/** The parsed document; an invalid one fails the calling workflow with `InvalidSpec` (a plain Error would only
 * fail its workflow task, again and again). */
export function specOf(document: unknown): ServedModel {
  const parsed = safeParseServedModel(document);
  if (parsed.ok) return parsed.model;
  // A document a newer rule refuses, in a history recorded before that rule (the child was started then), is replayed
  // as it was accepted; a new start is refused. The marker is written only when the parser refuses, so a history
  // whose document it accepted holds none, whichever rule came later (the bounds and the image grammar too).
  const before = asAcceptedBefore(() => safeParseServedModel(document));
  if (before.ok && !patched(NEWER_SPEC_RULES)) return before.model;
  throw failure(FAILURE.InvalidSpec, formatSpecIssues(parsed.issues), parsed.issues);
}

/** Marks a parent's history recorded after the rules that `asAcceptedBefore` relaxes. */
const NEWER_SPEC_RULES = 'ferry-spec-rules-2026-12';

// One handler for every child of this workflow, keyed by the child's workflow ID. Module state is per workflow
// execution in Temporal's sandbox.
const reported = new Map<string, PhaseChange>();
let listening = false;

/**
 * Starts the model's ServeModelWorkflow as a child of the calling workflow. Parent-close policy REQUEST_CANCEL: a
 * parent that crashes, times out or is terminated has the server cancel the child, and a cancelled ServeModelWorkflow
 * tears its model down, so no GPU server outlives the workflow that asked for it. (TERMINATE would skip the teardown;
 * ABANDON would leave the model running.) The calling workflow must not set its own `ferry.phaseChanged` handler.
 */
export async function serveAsChild(document: unknown, opts: ServeAsChildOptions = {}): Promise<ServedModelChild> {
  const spec = specOf(document);
  const workflowId = workflowIdFor(modelRefOf(spec));
  if (!listening) {
    listening = true;
    setHandler(phaseChangedSignal, (change) => void reported.set(change.workflowId, change));
  }
  const scope = new CancellationScope();
  // The child's workflow has ended (its result or failure is not needed: `ready()` reports what it signalled).
  let ended = false;
  let markStarted!: () => void;
  let failStart!: (err: unknown) => void;
  const started = new Promise<void>((resolve, reject) => {
    markStarted = resolve;
    failStart = reject;
  });
  const served = scope.run(async () => {
    let child;
    try {
      child = await startChild<typeof ServeModelWorkflow>('ServeModelWorkflow', {
        args: [{ version: 1, spec, ...(opts.options ? { options: opts.options } : {}) }],
        taskQueue: opts.taskQueue ?? taskQueueFor(spec.spec.cluster),
        workflowId,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
      });
    } catch (err) {
      failStart(err);
      throw err;
    }
    markStarted();
    return child.result();
  });
  const settled = served.then(
    () => void (ended = true),
    () => void (ended = true),
  );
  await started;

  return {
    workflowId,
    spec,
    get latest() {
      return reported.get(workflowId);
    },
    async ready() {
      // Idle serves as Ready does: its front holds a request and wakes it.
      await condition(() => ended || ['Ready', 'Idle', 'Failed'].includes(reported.get(workflowId)?.phase ?? ''));
      const change = reported.get(workflowId);
      if ((change?.phase === 'Ready' || change?.phase === 'Idle') && change.endpoint) {
        const { endpoint, generation } = change;
        return { endpoint, generation, servedModelName: spec.spec.engine.servedModelName };
      }
      const why = change?.lastError
        ? `${change.lastError.reason}: ${change.lastError.message}`
        : `its workflow ended in phase ${change?.phase ?? 'Pending'}`;
      throw failure(FAILURE.ServeFailed, `model ${workflowId} did not become Ready: ${why}`, change?.lastError);
    },
    async delete() {
      scope.cancel();
      await CancellationScope.nonCancellable(() => settled);
    },
  };
}
