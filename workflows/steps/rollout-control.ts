// A person's or a program's word on a rollout under way (`ferry rollout approve|abort`; docs/design/rollout.md): the
// rollout's steps run in a scope an abort cancels, and an approval gate waits for an approve. Workflow code.
import { CancellationScope, condition } from '@temporalio/workflow';
import { describeRef, failure, FAILURE, type ModelStatus, type RolloutActionInput } from '../contract/index.js';

export type RolloutWord = Pick<RolloutActionInput, 'action' | 'reason' | 'requestedBy'>;

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
  return `${word.action === 'approve' ? 'approved' : 'aborted'}${by}${word.reason ? `: ${word.reason}` : ''}`;
}

/**
 * Refuses (before it reaches history) an action with no rollout to act on: none under way, an approve with no approval
 * gate waiting, another candidate named; and a tenant's action on a model it does not own (as if there were none).
 */
export function validateRolloutAction(status: ModelStatus, input: RolloutActionInput): void {
  if (typeof input !== 'object' || input === null || (input.action !== 'approve' && input.action !== 'abort')) {
    throw failure(FAILURE.InvalidInput, 'a rollout action is { action: "approve" | "abort", revision?, reason? }');
  }
  if (input.tenant !== undefined && input.tenant !== status.tenant) {
    throw failure(FAILURE.ModelNotFound, `${describeRef(status)}: no such model`);
  }
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
