// Changes by signal (`update`, `delete`), for clients that cannot send an Update: a Temporal Schedule, Signal-With-Start,
// the Web UI, `temporal workflow signal`. Handled by the Updates' own code; what differs is that a signal cannot be
// refused before it lands, so a refused one is recorded in status and changes nothing (docs/client.md, "Signals").
import {
  CancellationScope,
  condition,
  log,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { patchedUnlessPinned } from './pinned.js';
import {
  failure,
  INVALID_SPEC,
  MODEL_DELETING,
  modelRefOf,
  safeParseServedModel,
  updateModelSignal,
  workflowIdFor,
  type DeleteModelInput,
  type FerryLocalActivities,
  type ModelStatus,
  type ServedModel,
  type ServeModelInput,
  type UpdateModelInput,
} from './contract/index.js';
import { refuseChange, type FailureInfo } from './status/transitions.js';
import { now } from './steps/context.js';

/**
 * Runs with this patch act on the `update` and `delete` signals. Before it they had no handler, and a history may hold
 * one that was ignored: it replays ignored. One ID for the handlers and for a start whose spec comes by signal.
 */
const SIGNALLED_CHANGES = 'signalled-changes';

/** What the signals act on: the model (lifecycle.ts). */
export interface SignalTarget {
  readonly deletion: { reason?: string } | undefined;
  readonly desired: ServedModel;
  /** Applies an update the check accepted, as the Update does. */
  update(update: UpdateModelInput): unknown;
  requestDelete(request: DeleteModelInput | undefined): void;
  readonly status: ModelStatus;
  set(next: ModelStatus): void;
}

/** The verdict on a signalled spec, recorded in history as the local activity's result. */
const { checkSpecChange } = proxyLocalActivities<FerryLocalActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 5 },
});

export class SignalledChanges {
  /** Signalled updates, one at a time in the order they came. */
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly model: SignalTarget) {}

  /** The `update` signal's handler: resolves once the change is applied or refused. */
  update(input: UpdateModelInput): Promise<void> {
    if (!patchedUnlessPinned(SIGNALLED_CHANGES)) return ignored('update');
    this.queue = this.queue.then(() => this.apply(input));
    return this.queue;
  }

  /** The `delete` signal's handler: the delete Update without its answer; on a model being deleted, nothing. */
  delete(input: DeleteModelInput | undefined): void {
    if (!patchedUnlessPinned(SIGNALLED_CHANGES)) return void ignored('delete');
    if (this.model.deletion) return;
    const reason = typeof input?.reason === 'string' ? input.reason : 'delete signal';
    this.model.requestDelete({ reason });
  }

  private async apply(input: UpdateModelInput): Promise<void> {
    const refused = await this.check(input);
    // A delete may have come while the check ran.
    const why = this.model.deletion ? deleting : refused;
    if (why) this.model.set(refuseChange(this.model.status, why, now()));
    else this.model.update(input);
  }

  /** Why the change is refused, if it is. */
  private async check(input: UpdateModelInput): Promise<FailureInfo | undefined> {
    if (this.model.deletion) return deleting;
    if (typeof input !== 'object' || input === null || !('spec' in input)) {
      return { reason: INVALID_SPEC, message: 'the update signal needs { spec: <ServedModel document> }' };
    }
    // Not cancelled with the workflow: a check of a few milliseconds, whose verdict the history then holds.
    const verdict = await CancellationScope.nonCancellable(() =>
      checkSpecChange({ desired: this.model.desired, doc: input.spec }),
    ).catch((err: unknown) => ({
      accepted: false as const,
      reason: 'CheckFailed',
      message: `the spec could not be checked: ${err instanceof Error ? err.message : String(err)}`,
    }));
    return verdict.accepted ? undefined : { reason: verdict.reason, message: verdict.message };
  }
}

/**
 * A start with no spec — Signal-With-Start with the `update` signal, as a tool that only signals serves a model — takes
 * its spec from the first update signal; the other signals that came with it are applied after, in order. The spec
 * must name the model this workflow ID is for.
 */
export async function withSignalledSpec(
  input: ServeModelInput,
): Promise<{ input: ServeModelInput; later: UpdateModelInput[] }> {
  const bySignal = input?.version === 1 && input.spec === undefined && input.state === undefined;
  if (!bySignal || !patchedUnlessPinned(SIGNALLED_CHANGES)) return { input, later: [] };
  const signalled: UpdateModelInput[] = [];
  // The signals that came with the start are delivered as the handler is set.
  setHandler(updateModelSignal, (update) => void signalled.push(update));
  if (signalled.length === 0 && !(await condition(() => signalled.length > 0, SPEC_SIGNAL_WAIT))) {
    throw failure(
      INVALID_SPEC,
      `started with no spec, and no update signal came within ${SPEC_SIGNAL_WAIT}: start it with its spec, or by Signal-With-Start with the update signal { spec: <ServedModel document> }`,
    );
  }
  const [first, ...later] = signalled;
  const doc = typeof first === 'object' && first !== null ? first.spec : undefined;
  const parsed = safeParseServedModel(doc);
  if (parsed.ok) {
    const expected = workflowIdFor(modelRefOf(parsed.model));
    const { workflowId } = workflowInfo();
    if (expected !== workflowId) {
      throw failure(
        INVALID_SPEC,
        `the spec is for ${expected}, not this workflow (${workflowId}): start it with that ID`,
      );
    }
  }
  return { input: { ...input, spec: doc as ServedModel }, later };
}

const SPEC_SIGNAL_WAIT = '1 minute';

const deleting: FailureInfo = { reason: MODEL_DELETING, message: 'the model is being deleted' };

/** A run from before the patch did not handle the signal: its replay does not either. */
function ignored(name: string): Promise<void> {
  log.warn(`the ${name} signal is not handled by this run (it started before Ferry handled signals); send the Update`);
  return Promise.resolve();
}
