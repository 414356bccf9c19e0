// MoveModelWorkflow: a model moved to another cluster as one durable operation (docs/design/fleet.md, §3). It acts on
// both models through their own workflows, with the serving activities (Update-with-Start, the wait for Ready, the
// delete Update), so it needs neither cluster's API server itself and runs on the source cluster's worker:
//
//   serve     the source's document, with spec.cluster set to the target, started on the target's worker (its own
//             workflow, its own weights pull)
//   ready     until the target is Ready at that generation
//   teardown  the source's delete, as `ferry delete --wait` does it, its status saying where the model went; waited
//             for `teardownTimeoutMs`, past which (a source cluster that does not answer) the move completes and the
//             source's workflow goes on with it
//
// Until the teardown begins a cancel aborts the move: the target is deleted, the source never touched. A target that
// fails or is not Ready in time is deleted too, and the move fails with its reason. From the teardown on a cancel is
// not taken: the target serves, and the source goes. A crash anywhere resumes where it was: each step is an activity.
import { CancellationScope, isCancellation, setHandler, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import {
  DEFAULT_TEARDOWN_TIMEOUT_MS,
  documentOnCluster,
  failure,
  FAILURE,
  moveStatusQuery,
  type FailureType,
  type ModelRef,
  type MoveModelInput,
  type MoveModelResult,
  type MoveStatus,
  type MoveStep,
} from './contract/index.js';
import { whenVersioned } from './pinned.js';
import {
  applyServedModel,
  awaitModelReadyWithin,
  deleteServedModel,
  deleteServedModelWithin,
} from './serving-calls.js';

export async function MoveModelWorkflow(input: MoveModelInput): Promise<MoveModelResult> {
  const { from } = input;
  const to: ModelRef = { ...from, cluster: input.to };
  const status: MoveStatus = { from, to, step: 'serve', timeline: [] };
  setHandler(moveStatusQuery, () => status);
  const now = () => new Date(Date.now()).toISOString();
  const enter = (step: MoveStep, detail?: string) => {
    const last = status.timeline.at(-1);
    if (last && !last.endedAt) last.endedAt = now();
    status.step = step;
    status.timeline.push({ step, startedAt: now(), ...(detail ? { detail } : {}) });
    if (step === 'done' || step === 'aborted' || step === 'failed') status.timeline.at(-1)!.endedAt = now();
  };
  enter('serve', `${describe(to)}`);

  let ready: { endpoint: string; servedModelName: string };
  try {
    // Not cancellable: an abort while the request is out must find the target it started, to delete it. Claimed by
    // this move: a model of the name that someone served on the target since the client looked is sent nothing.
    const { workflowId, runId } = workflowInfo();
    const applied = await CancellationScope.nonCancellable(() =>
      applyServedModel({ document: documentOnCluster(input.document, input.to), claim: `${workflowId}/${runId}` }),
    );
    enter('ready', `generation ${applied.generation}`);
    const target = await awaitModelReadyWithin(input.readyTimeoutMs)({
      ref: to,
      generation: applied.generation,
      ...(input.readyTimeoutMs !== undefined ? { timeoutMs: input.readyTimeoutMs } : {}),
    });
    ready = { endpoint: target.endpoint ?? '', servedModelName: target.servedModelName };
    status.endpoint = ready.endpoint;
  } catch (err) {
    if (reasonOf(err) === FAILURE.NameConflict) {
      // Not this move's: nothing was started, and what is there is someone else's, left alone.
      status.error = { reason: FAILURE.NameConflict, message: messageOf(err) };
      enter('failed', status.error.message);
      throw failure(
        FAILURE.NameConflict,
        `the move to cluster ${input.to} did not start: ${messageOf(err)}; ${describe(from)} is as it was`,
      );
    }
    // Aborted, or the target failed: the target goes, the source stays as it was.
    const aborted = isCancellation(err);
    status.error = aborted
      ? { reason: 'Cancelled', message: 'the move was aborted before the switch' }
      : { reason: reasonOf(err), message: messageOf(err) };
    await CancellationScope.nonCancellable(() =>
      deleteServedModel({
        ref: to,
        reason: aborted ? `move from ${from.cluster} aborted` : `move from ${from.cluster} failed`,
      }).catch((gone: unknown) => {
        // A target never started (its document refused) has nothing to delete.
        if (reasonOf(gone) !== FAILURE.ModelNotFound) throw gone;
      }),
    );
    enter(aborted ? 'aborted' : 'failed', status.error.message);
    if (aborted) throw err;
    const type = status.error.reason in FAILURE ? (status.error.reason as FailureType) : FAILURE.ServeFailed;
    throw failure(
      type,
      `the move to cluster ${input.to} failed (${status.error.reason}: ${status.error.message}); ` +
        `the target was deleted, ${describe(from)} is as it was`,
    );
  }

  // The switch: from here the move completes whatever is asked of it.
  enter('teardown', describe(from));
  const teardownTimeoutMs = input.teardownTimeoutMs ?? DEFAULT_TEARDOWN_TIMEOUT_MS;
  const teardown = await CancellationScope.nonCancellable(() =>
    deleteServedModelWithin(teardownTimeoutMs)({
      ref: from,
      reason: `moved to cluster ${input.to} (${workflowInfo().workflowId})`,
      // The switch: the source's status says where the model serves now, while it is torn down and after.
      movedTo: { cluster: input.to, endpoint: ready.endpoint, move: workflowInfo().workflowId },
      waitMs: teardownTimeoutMs,
    }),
  );
  // A source cluster that does not answer does not hold the move: its workflow goes on with the teardown.
  const seconds = Math.round(teardownTimeoutMs / 1000);
  const pending = teardown.signalled
    ? `; no worker of ${from.cluster} took the delete in ${seconds} s: sent as a signal, applied once one is back`
    : teardown.pending
      ? `; the teardown on ${from.cluster} goes on (not done in ${seconds} s)`
      : '';
  enter('done', `serving on ${input.to} at ${ready.endpoint}${pending}`);
  return {
    from,
    to,
    ...ready,
    deleted: teardown.deleted,
    retained: teardown.retained,
    ...(teardown.pending ? { teardownPending: true } : {}),
    ...(teardown.signalled ? { teardownSignalled: true } : {}),
  };
}

const describe = (ref: ModelRef) => `${ref.namespace}/${ref.name} on cluster ${ref.cluster}`;

/** The failure's type as the catalogue names it (an activity's cause), else its class. */
function reasonOf(err: unknown): string {
  const cause = (err as { cause?: { type?: string } }).cause;
  return cause?.type ?? (err as Error).name ?? 'Error';
}

function messageOf(err: unknown): string {
  const cause = (err as { cause?: { message?: string } }).cause;
  return cause?.message ?? (err as Error).message ?? String(err);
}

// Auto-upgrade, as the command workflows (commands.ts): its wait may last hours, and pinned it would keep an old
// version of the worker up that long. A change to what it does with an input an older release could have started it
// with takes a patch.
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), MoveModelWorkflow);
