// Delete a model: a Workflow Update that cancels whatever runs, tears everything down, and completes the workflow.
import type { Client, WorkflowUpdateHandle } from '@temporalio/client';
import {
  deleteModelUpdate,
  type DeleteResult,
  type FinalStatus,
  type ModelRef,
  type ModelStatus,
  type MovedTo,
} from '../workflows/contract/index.js';
import type { EarlyUpdate } from './early-update.js';
import { ModelNotFoundError, ModelWorkflowClosedError, WaitTimeoutError } from './errors.js';
import { describeModel, modelHandle } from './model-status.js';
import { isTimeout, sendUpdate, updateOutcome } from './send-update.js';

/** Teardown retries until everything is gone; a wait gives up (the teardown does not) after this by default. */
export const DEFAULT_DELETE_TIMEOUT_MS = 15 * 60_000;

export interface DeleteOptions {
  /** Resolve once everything is deleted and the workflow completed; otherwise once the delete is accepted. */
  wait?: boolean;
  /** How long `wait` may take. Default 15 minutes. */
  timeoutMs?: number;
  /** Recorded in the model's status and timeline. */
  reason?: string;
  /** Stops `wait` early (the teardown goes on); rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The tenant asking (its Nexus handler): a model it does not own refuses the delete as `ModelNotFoundError`. */
  tenant?: string;
  /** Who asks, recorded for audit (default: the client's Temporal identity). */
  requestedBy?: string;
  /** Set by a move (MoveModelWorkflow) when the model serves on another cluster: its status says where. */
  movedTo?: MovedTo;
  /** Called once the model's workflow accepted the delete (before the wait). */
  onAccepted?: () => void;
}

export interface DeleteModelResult {
  ref: ModelRef;
  /** The model's workflow had already completed: nothing was sent. */
  alreadyDeleted: boolean;
  /** What was deleted and retained, with `wait` (or when already deleted: from the final status). */
  teardown?: DeleteResult | FinalStatus['teardown'];
  /** The final status (phase Deleted), with `wait` or when already deleted. */
  status?: ModelStatus;
}

/**
 * Deletes the model. Idempotent: a model whose workflow already completed resolves with `alreadyDeleted`.
 * Throws `ModelNotFoundError` when there never was such a model.
 */
export async function deleteModel(
  client: Client,
  ref: ModelRef,
  options: DeleteOptions = {},
): Promise<DeleteModelResult> {
  return deleteModelAfter(undefined, client, ref, options);
}

/** `deleteModel`, going on under the update the CLI already sent, if it is this one (`ferry delete`). */
export async function deleteModelAfter(
  early: EarlyUpdate | undefined,
  client: Client,
  ref: ModelRef,
  options: DeleteOptions = {},
): Promise<DeleteModelResult> {
  // The update first: a running model is the usual case, and one call less is a teardown that starts sooner. Only
  // when no workflow runs does a describe tell a model never served from one already deleted (or, in a race, one
  // served again since: then the update goes once more).
  let update: WorkflowUpdateHandle<DeleteResult> | undefined;
  for (let attempt = 0; !update; attempt++) {
    try {
      update = await sendUpdate(
        client,
        ref,
        deleteModelUpdate,
        {
          ...(options.reason ? { reason: options.reason } : {}),
          ...(options.tenant !== undefined ? { tenant: options.tenant } : {}),
          requestedBy: options.requestedBy ?? client.options.identity,
          ...(options.movedTo ? { movedTo: options.movedTo } : {}),
        },
        undefined,
        attempt === 0 ? early : undefined,
      );
    } catch (err) {
      if (!(err instanceof ModelNotFoundError)) throw err;
      const execution = await describeModel(client, ref);
      const state = execution.status.name;
      if (state === 'COMPLETED') {
        const final: FinalStatus = await modelHandle(client, ref, execution.runId).result();
        return { ref, alreadyDeleted: true, teardown: final.teardown, status: final.status };
      }
      if (state !== 'RUNNING') throw new ModelWorkflowClosedError(ref, state);
      if (attempt > 0) throw err;
    }
  }
  options.onAccepted?.();
  if (!options.wait) return { ref, alreadyDeleted: false };

  const timeoutMs = options.timeoutMs ?? DEFAULT_DELETE_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const late = () => new WaitTimeoutError(ref, timeoutMs, DELETE_WAIT);
  try {
    const outcome = client.withAbortSignal(signal, async () => {
      const teardown = await updateOutcome(update, ref);
      const final: FinalStatus = await modelHandle(client, ref, update.workflowRunId).result();
      return { ref, alreadyDeleted: false, teardown, status: final.status };
    });
    // A client on a worker's NativeConnection does not abort its requests (the SDK ignores the signal there): the
    // signal is raced as well, so that the wait ends on time wherever it runs (a move's teardown in an activity).
    return await Promise.race([outcome, aborted(signal)]);
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason;
    if (timeout.aborted && (isTimeout(err) || err === timeout.reason)) throw late();
    throw err;
  }
}

/** What a `WaitTimeoutError` of the teardown's wait (after the delete was accepted) says the model did not do. */
export const DELETE_WAIT = 'finish deleting';

/** Rejects with the signal's reason once it aborts (a settled race leaves it pending, holding nothing). */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    else signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}
