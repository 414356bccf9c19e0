// A person's or a program's word on a model's rollouts (`ferry rollout approve|abort|undo`; docs/design/rollout.md): the
// rollout's steps run in a scope an abort cancels, and an approval gate waits for an approve. Workflow code.
import { CancellationScope, condition } from '@temporalio/workflow';
import {
  describeRef,
  failure,
  FAILURE,
  newRevision,
  withRevisionOf,
  type ModelStatus,
  type RolloutActionInput,
  type ServedModel,
  type UpdateModelInput,
} from '../contract/index.js';
import type { World } from './context.js';

export type RolloutWord = Pick<RolloutActionInput, 'action' | 'reason' | 'requestedBy' | 'keepWeights'>;

const ACTIONS: RolloutActionInput['action'][] = ['approve', 'abort', 'undo'];

export class RolloutControl {
  private scope: CancellationScope | undefined;
  private approved: RolloutWord | undefined;
  /** The abort that cancelled the rollout's steps, if one did. */
  aborted: RolloutWord | undefined;

  /** Runs a rollout's steps, which an abort cancels. */
  async run<T>(steps: () => Promise<T>): Promise<T> {
    this.approved = this.aborted = undefined;
    const scope = new CancellationScope();
    this.scope = scope;
    try {
      return await scope.run(steps);
    } finally {
      this.scope = undefined;
    }
  }

  /** An approve or an abort accepted by the validator. */
  take(word: RolloutWord): void {
    if (word.action === 'approve') {
      this.approved = word;
      return;
    }
    this.aborted = word;
    this.scope?.cancel();
  }

  /** Waits for an approve, at most `ms`; undefined when it did not come in time. */
  async approval(ms: number): Promise<RolloutWord | undefined> {
    this.approved = undefined;
    const came = await condition(() => this.approved !== undefined, ms);
    return came ? this.approved : undefined;
  }
}

/** `by X: reason`, for the gate's and the rollout's message. */
export function describeWord(word: RolloutWord): string {
  const by = word.requestedBy ? ` by ${word.requestedBy}` : '';
  const done = { approve: 'approved', abort: 'aborted', undo: 'undone' }[word.action];
  const kept = word.keepWeights ? ' (its weights kept)' : '';
  return `${done}${by}${kept}${word.reason ? `: ${word.reason}` : ''}`;
}

/**
 * Numbers an accepted spec's revision: a new revision takes the next number (`r<n>`); an undo (`undoTo`) returns to the
 * revision before under its own name, at `generation`, for `reason`.
 */
export function numberRevision(
  world: World,
  desired: ServedModel,
  next: ServedModel,
  generation: number,
  undoTo: { revision: string; reason?: string } | undefined,
): void {
  if (undoTo) world.undo = { ...undoTo, generation };
  else if (newRevision(desired, next)) world.revision = (world.revision ?? 1) + 1;
}

/** The update an accepted undo is: the spec in force with the revision before's weights and engine pods. */
export function undoRequest(
  desired: ServedModel,
  previous: World['previous'],
  input: RolloutActionInput,
): UpdateModelInput {
  return {
    spec: withRevisionOf(desired, previous!.spec!),
    ...(input.requestedBy !== undefined ? { requestedBy: input.requestedBy } : {}),
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
  };
}

/**
 * Refuses (before it reaches history) an action with no rollout to act on: none under way, an approve with no approval
 * gate waiting, another candidate named; and a tenant's action on a model it does not own (as if there were none).
 */
export function validateRolloutAction(
  status: ModelStatus,
  input: RolloutActionInput,
  model: { previous: World['previous']; desired: ServedModel },
): void {
  if (typeof input !== 'object' || input === null || !ACTIONS.includes(input.action)) {
    throw failure(
      FAILURE.InvalidInput,
      'a rollout action is { action: "approve" | "abort" | "undo", revision?, reason?, keepWeights? }',
    );
  }
  if (input.keepWeights !== undefined && input.action !== 'abort') {
    throw failure(FAILURE.InvalidInput, `keepWeights is for an abort, not an ${input.action}`);
  }
  if (input.tenant !== undefined && input.tenant !== status.tenant) {
    throw failure(FAILURE.ModelNotFound, `${describeRef(status)}: no such model`);
  }
  if (input.action === 'undo') return validateUndo(status, input, model);
  const { rollout } = status;
  if (rollout?.state !== 'Progressing') {
    const last = rollout ? `; the last one, ${rollout.revision}, was ${rollout.state.toLowerCase()}` : '';
    throw failure(FAILURE.NoRolloutWaiting, `${describeRef(status)} has no rollout under way${last}`);
  }
  if (input.revision !== undefined && input.revision !== rollout.revision) {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${describeRef(status)} is rolling out ${rollout.revision}, not ${input.revision}`,
    );
  }
  if (input.action === 'approve' && !rollout.awaiting) {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${describeRef(status)}: the rollout of ${rollout.revision} is at step ${rollout.step} of ${rollout.steps}, not waiting for an approval`,
    );
  }
}

/**
 * Refuses an undo with nothing to return to (no revision before kept, or kept without its spec), one during a rollout
 * (an abort is the way back then), one for another revision, and one on a model that is not Ready or cannot roll a
 * revision out beside the current one.
 */
function validateUndo(
  status: ModelStatus,
  input: RolloutActionInput,
  { previous, desired }: { previous: World['previous']; desired: ServedModel },
): void {
  const ref = describeRef(status);
  const { rollout } = status;
  if (rollout?.state === 'Progressing') {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${ref} is rolling ${rollout.revision} out: ferry rollout abort returns every request to ${rollout.from}`,
    );
  }
  if (!previous) {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${ref} keeps no revision before ${status.revision ?? 'r1'} to return to (rollout.keepRevisions 1 keeps one after a rollout)`,
    );
  }
  if (!previous.spec) {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${ref}: the spec ${previous.revision} served with was not kept (it was rolled out by an older Ferry): apply it again instead`,
    );
  }
  if (input.revision !== undefined && input.revision !== previous.revision) {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${ref}: the revision before is ${previous.revision}, not ${input.revision}`,
    );
  }
  const strategy = desired.spec.rollout?.strategy;
  if (!desired.spec.front || strategy === undefined || strategy === 'Recreate') {
    throw failure(
      FAILURE.NoRolloutWaiting,
      `${ref}: an undo starts ${previous.revision} beside the revision that serves, which needs front and rollout.strategy BlueGreen or Canary`,
    );
  }
  if (status.phase !== 'Ready') {
    throw failure(FAILURE.NoRolloutWaiting, `${ref} is ${status.phase}: an undo needs it Ready`);
  }
}
