// `ferry rollout approve|abort` and the library call: a word on the rollout under way (docs/design/rollout.md), as a
// Workflow Update the workflow validates before it reaches history.
import type { Client } from '@temporalio/client';
import {
  type ModelRef,
  rolloutActionUpdate,
  type RolloutActionInput,
  type RolloutActionResult,
} from '../workflows/contract/index.js';
import { sendUpdate, updateOutcome } from './send-update.js';

export type RolloutActionOptions = Pick<RolloutActionInput, 'revision' | 'reason'>;

/**
 * Approves the approval gate the model's rollout waits at, or aborts its rollout (every request back to the revision
 * that served, the candidate taken away). Throws `NoRolloutError` when there is no rollout to act on (none under way,
 * none waiting for an approval, or another candidate than `revision`), `ModelNotFoundError` when the model is not
 * running. Resolves once the workflow has taken it: an abort's rollback goes on in the workflow (`waitForPhase`).
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
