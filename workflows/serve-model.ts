// One served model for its whole life: claim → storage → pull → release → engine → rollout → health → Ready, then
// watch it, apply updates, and tear it all down when deleted or cancelled. The state and the work live in
// ModelLifecycle (lifecycle.ts); this function registers the handlers and runs the main loop.
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  log,
  makeContinueAsNewFunc,
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import { patchedUnlessPinned, whenVersioned } from './pinned.js';
import { resolveOptions } from './activity-options.js';
import {
  awaitPhaseUpdate,
  deleteModelSignal,
  deleteModelUpdate,
  failure,
  formatSpecIssues,
  INVALID_SPEC,
  modelChangedSignal,
  progressSignal,
  rolloutActionUpdate,
  type RolloutActionInput,
  placementIssue,
  safeParseServedModel,
  scaleSignal,
  specQuery,
  statusQuery,
  UNSUPPORTED_INPUT,
  updateModelSignal,
  updateModelUpdate,
  type AwaitPhaseInput,
  type DeleteModelInput,
  type FinalStatus,
  type ServedModel,
  type ServeModelInput,
  type UpdateModelInput,
} from './contract/index.js';
import { withAcceptedDefaults } from './accepted-defaults.js';
import { ModelLifecycle } from './lifecycle.js';
import { validateAwaitPhase } from './phase-waits.js';
import { validateRolloutAction, undoRequest } from './steps/rollout-control.js';
import { SignalledChanges, withSignalledSpec } from './signalled.js';

export async function ServeModelWorkflow(started: ServeModelInput): Promise<FinalStatus> {
  const { input, later } = await withSignalledSpec(started);
  const model = new ModelLifecycle(checkedSpec(input), input, resolveOptions(input.options));
  const signalled = new SignalledChanges(model);
  for (const update of later) signalled.update(update);

  setHandler(statusQuery, () => model.status, {
    description: 'The full status: phase, conditions, endpoint, replicas, last error, timeline, download progress',
  });
  setHandler(specQuery, () => model.desired, {
    description: 'The spec the model is being brought to (the latest accepted one), every default filled in',
  });
  setHandler(progressSignal, (progress) => model.progress(progress), {
    description: 'From the activities: download bytes and what a step waits for; folded into the status',
  });
  setHandler(modelChangedSignal, (change) => model.wake(change), {
    description: "From the worker's watch: one of the model's objects changed; the workflow looks at it",
  });
  setHandler(scaleSignal, (decision) => model.scale(decision), {
    description:
      "From the worker's autoscaler (spec.scaling): a new replica count, applied unless made against another count",
  });
  setHandler(updateModelUpdate, (update) => model.update(update), {
    validator: (update: UpdateModelInput) => model.validateUpdate(update),
    description: 'Change the spec; rejected with field-level errors, reconciled afterwards',
  });
  setHandler(deleteModelUpdate, (request) => model.delete(request), {
    validator: (request: DeleteModelInput | undefined) => model.validateDelete(request),
    description: 'Tear the model down; returns what was deleted and retained',
  });
  setHandler(
    rolloutActionUpdate,
    (input) => {
      if (input.action === 'undo') {
        const { previous } = model.world;
        const to = { revision: previous!.revision, ...(input.reason ? { reason: input.reason } : {}) };
        const { generation } = model.update(undoRequest(model.desired, previous, input), to);
        return { revision: previous!.revision, action: input.action, generation };
      }
      model.rollout.take(input);
      return { revision: model.status.rollout!.revision, action: input.action };
    },
    {
      validator: (input: RolloutActionInput) => {
        validateRolloutAction(model.status, input, { previous: model.world.previous, desired: model.desired });
        if (input.action === 'undo') model.validateUpdate(undoRequest(model.desired, model.world.previous, input));
      },
      description:
        'Approve the approval gate a rollout waits at, abort the rollout (the candidate rolled back), or undo the last one (back to the revision before, with no gate); input { action: "approve" | "abort" | "undo", revision?, reason?, keepWeights? }',
    },
  );
  setHandler(updateModelSignal, (update) => signalled.update(update), {
    description:
      'Change the spec, for clients that can only signal: applied like the update Update, or refused and the reason shown in status (lastError, the timeline); input { spec: <ServedModel document> }',
  });
  setHandler(deleteModelSignal, (request) => signalled.delete(request), {
    description: 'Tear the model down, like the delete Update without its answer; input {} or { reason }',
  });
  setHandler(awaitPhaseUpdate, (request) => model.awaitPhase(request), {
    validator: (request: AwaitPhaseInput) => validateAwaitPhase(request),
    description: 'Wait for a phase at a generation; returns the status (early, still pending, before the run ends)',
  });
  model.publish(input.state !== undefined);
  void model.expire();
  void model.keepSchedule();

  try {
    // Reconciles and watches until a delete arrives; continues as new when history grows long.
    while (!model.deletion) {
      if (model.due) {
        await model.reconcileLatest();
        continue;
      }
      // A phase wait in flight is let go (it asks the next run); other handlers finish first.
      const moving = model.versionChanged;
      if ((moving || model.historyIsLong()) && (allHandlersFinished() || model.waiting)) {
        model.close();
        await condition(allHandlersFinished);
        // Onto the deployment's new current version (Worker Versioning): the next run starts there, pinned to it.
        if (moving) await moveToCurrentVersion()(model.carryOver());
        await continueAsNew<typeof ServeModelWorkflow>(model.carryOver());
      }
      // Moving waits for the handlers that run (an update's or a delete's work is due first).
      if (moving) await condition(() => allHandlersFinished() || model.waiting || model.due || !!model.deletion);
      else await model.idle();
    }
  } catch (err) {
    if (isCancellation(err) && CancellationScope.current().consideredCancelled) {
      model.deletion ??= { reason: 'workflow cancelled' };
      await CancellationScope.nonCancellable(async () => {
        await model.tearDown();
        model.close();
        await condition(allHandlersFinished);
      });
    }
    throw err;
  }
  return await CancellationScope.nonCancellable(async () => {
    const result = await model.tearDown();
    model.close();
    await condition(allHandlersFinished);
    return model.final(result);
  });
}

/**
 * Pinned: a run replays only on the version of Ferry's worker that started it (docs/design/upgrades.md), and moves to
 * a new version by continuing as new, when idle.
 */
setWorkflowOptions(whenVersioned('PINNED'), ServeModelWorkflow);

/**
 * Continue as new onto the Worker Deployment's current version. The option is the function's, not an argument of
 * `continueAsNew` (there it would become the next run's second argument); made in the run, it reads this run's info.
 */
function moveToCurrentVersion() {
  return makeContinueAsNewFunc<typeof ServeModelWorkflow>({ initialVersioningBehavior: 'AUTO_UPGRADE' });
}

/** The input's spec, parsed again for starts that bypass the client (parsing is idempotent). */
function checkedSpec(input: ServeModelInput): ServedModel {
  if (input?.version !== 1) {
    throw failure(UNSUPPORTED_INPUT, `ServeModelWorkflow takes input version 1, got ${JSON.stringify(input?.version)}`);
  }
  const parsed = unplaced(safeParseServedModel(input.spec));
  // A start recorded before a default existed (or a run continued from one) keeps the spec it was accepted with.
  const withDefaults = (model: ServedModel) =>
    withAcceptedDefaults(
      input.spec,
      model,
      () => input.state === undefined && patchedUnlessPinned(NEW_DEFAULTS_AT_START),
    );
  if (parsed.ok) return withDefaults(parsed.model);
  // A spec accepted by the checks of its day (before control characters, flag abbreviations, revision and enum
  // rules, the bounds and the image grammar were refused) keeps its model running: in a run it continued into, and in
  // a history recorded before. Only a new start is refused: the marker is written only here, when the parser refuses,
  // so a history whose start it accepted holds none, whichever rule came later.
  if (input.state !== undefined || !patchedUnlessPinned(STRICTER_SPEC_CHECKS)) {
    log.warn('the spec breaks a rule it was accepted without; serving it as it was accepted', {
      issues: formatSpecIssues(parsed.issues),
    });
    return input.spec;
  }
  throw failure(INVALID_SPEC, formatSpecIssues(parsed.issues), parsed.issues);
}

/** A placed document is refused as an invalid one is (a parser from before placement refused the field). */
function unplaced(parsed: ReturnType<typeof safeParseServedModel>): ReturnType<typeof safeParseServedModel> {
  const issue = parsed.ok ? placementIssue(parsed.model) : undefined;
  return issue ? { ok: false, issues: [issue] } : parsed;
}

const NEW_DEFAULTS_AT_START = 'defaults-2026-12';

/** Starts from before the stricter spec checks are replayed with the spec they were accepted with. */
const STRICTER_SPEC_CHECKS = 'stricter-spec-checks';
