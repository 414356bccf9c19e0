// Changes by signal (`update`, `delete`), for clients that cannot send an Update: a Temporal Schedule, Signal-With-Start,
// the Web UI, `temporal workflow signal`. Handled by the Updates' own code; what differs is that a signal cannot be
// refused before it lands, so a refused one is recorded in status and changes nothing (docs/client.md, "Signals").
import { ApplicationFailure, condition, log, setHandler, workflowInfo } from '@temporalio/workflow';
import { patchedUnlessPinned } from './pinned.js';
import {
  asAcceptedBeforeBounds,
  failure,
  INVALID_SPEC,
  modelRefOf,
  safeParseServedModel,
  updateModelSignal,
  workflowIdFor,
  type DeleteModelInput,
  type ModelStatus,
  type MovedTo,
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

/**
 * Runs with this patch refuse a signalled update that only the bounds (32-bit whole numbers, durations up to 3650d,
 * quantities up to 2^53 - 1) and the image reference grammar refuse; older ones replay it accepted, as it was. Written
 * only when such a signal is refused, so a run that never met one holds no marker (as `stricter-spec-checks`).
 */
const SIGNALLED_SPEC_BOUNDS = 'spec-bounds-signalled';

/**
 * Runs with this patch take a signalled delete's `movedTo` into status, as the delete Update's (a move whose source's
 * worker did not accept the Update sends the signal instead); older ones replay without it. Written only when a delete
 * signal carries one.
 */
const SIGNALLED_MOVED_TO = 'signalled-delete-moved-to';

/** What the signals act on: the model (lifecycle.ts). */
export interface SignalTarget {
  readonly deletion: { reason?: string } | undefined;
  readonly desired: ServedModel;
  /** The Update's validator: throws the failure the Update would be refused with. */
  validateUpdate(update: UpdateModelInput): void;
  /** Applies an update the validator accepted, as the Update does. */
  update(update: UpdateModelInput): unknown;
  requestDelete(request: DeleteModelInput | undefined): void;
  readonly status: ModelStatus;
  set(next: ModelStatus): void;
}

/**
 * Handles the signals, in the order they came. The verdict on a signalled update is decided by the Update's validator
 * in workflow code, so a replay decides again: a rule of the parser that is added or relaxed later must be guarded by a
 * patch on this path as on a start's (`STRICTER_SPEC_CHECKS`, serve-model.ts), or a replay of a signal the old rules
 * decided otherwise would not match its history. (A local activity would record the verdict instead, but its marker
 * and the change it lets through can land in two workflow tasks when a query comes between, and a replay then puts
 * them in one: tried, and refused for that.)
 */
export class SignalledChanges {
  constructor(private readonly model: SignalTarget) {}

  /** The `update` signal's handler: the change is applied or refused before it returns. */
  update(input: UpdateModelInput): void {
    if (!patchedUnlessPinned(SIGNALLED_CHANGES)) return ignored('update');
    const why = this.check(input);
    if (why) this.model.set(refuseChange(this.model.status, why, now()));
    else this.model.update(input);
  }

  /** The `delete` signal's handler: the delete Update without its answer; on a model being deleted, nothing. */
  delete(input: DeleteModelInput | undefined): void {
    if (!patchedUnlessPinned(SIGNALLED_CHANGES)) return ignored('delete');
    if (this.model.deletion) return;
    const reason = typeof input?.reason === 'string' ? input.reason : 'delete signal';
    const movedTo = movedToOf(input?.movedTo);
    this.model.requestDelete({ reason, ...(movedTo && patchedUnlessPinned(SIGNALLED_MOVED_TO) ? { movedTo } : {}) });
  }

  /** Why the change is refused, if it is: what the Update's validator refuses it for. */
  private check(input: UpdateModelInput): FailureInfo | undefined {
    const why = this.verdict(() => this.model.validateUpdate(input));
    // Refused only by the bounds or the image grammar: accepted in a history recorded before them.
    if (
      why?.reason === INVALID_SPEC &&
      !this.verdict(() => asAcceptedBeforeBounds(() => this.model.validateUpdate(input)))
    ) {
      if (!patchedUnlessPinned(SIGNALLED_SPEC_BOUNDS)) return undefined;
    }
    return why;
  }

  private verdict(validate: () => void): FailureInfo | undefined {
    try {
      validate();
      return undefined;
    } catch (err) {
      if (err instanceof ApplicationFailure && err.type) return { reason: err.type, message: err.message };
      throw err;
    }
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

/** A signal's `movedTo` as the contract has it; anything else (a signal is not checked before it lands) is dropped. */
function movedToOf(value: unknown): MovedTo | undefined {
  const to = value as Partial<Record<keyof MovedTo, unknown>> | undefined;
  if (typeof to !== 'object' || to === null || typeof to.cluster !== 'string' || typeof to.move !== 'string') return;
  if (to.endpoint !== undefined && typeof to.endpoint !== 'string') return;
  return { cluster: to.cluster, move: to.move, ...(to.endpoint !== undefined ? { endpoint: to.endpoint } : {}) };
}

/** A run from before the patch did not handle the signal: its replay does not either. */
function ignored(name: string): void {
  log.warn(`the ${name} signal is not handled by this run (it started before Ferry handled signals); send the Update`);
}
