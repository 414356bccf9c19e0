// `ferry rollout approve|abort|undo` and the library call: a word on the rollout under way (docs/design/rollout.md), as a
// Workflow Update the workflow validates before it reaches history.
import type { Client } from '@temporalio/client';
import {
  type ModelRef,
  rolloutActionUpdate,
  type RolloutActionInput,
  type RolloutActionResult,
} from '../workflows/contract/index.js';
import { sendUpdate, updateOutcome } from './send-update.js';

export type RolloutActionOptions = Pick<RolloutActionInput, 'revision' | 'reason' | 'keepWeights'>;

/**
 * Approves the approval gate the model's rollout waits at, aborts its rollout (every request back to the revision
 * that served, the candidate taken away; its volume kept with `keepWeights`), or undoes the last one (back to the
 * revision before, whose weights were kept, with no gate). Throws `NoRolloutError` when there is nothing to act on
 * (no rollout under way, none waiting for an approval, another candidate than `revision`; for an undo: no revision
 * before kept, a rollout under way, a model not Ready), `ModelNotFoundError` when the model is not running. Resolves
 * once the workflow has taken it: a rollback or an undo goes on in the workflow (`waitForPhase`; an undo's result
 * names its `generation`).
 */
export async function rolloutAction(
  client: Client,
  ref: ModelRef,
  action: RolloutActionInput['action'],
  options: RolloutActionOptions = {},
): Promise<RolloutActionResult> {
  const request: RolloutActionInput = { action, ...options, requestedBy: client.options.identity };
  const handle = await sendUpdate(client, ref, rolloutActionUpdate, request);
  return await updateOutcome(handle, ref);
}
