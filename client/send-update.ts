// Sending a Workflow Update to a model, with the failures people can act on turned into typed errors.
import {
  isGrpcCancelledError,
  isGrpcDeadlineError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
  type WorkflowUpdateHandle,
} from '@temporalio/client';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import {
  INVALID_SPEC,
  MODEL_DELETING,
  type ModelRef,
  type SpecIssue,
  taskQueueFor,
} from '../workflows/contract/index.js';
import { InvalidSpecError, ModelDeletedError, ModelNotFoundError, NoWorkerError, WaitTimeoutError } from './errors.js';
import { hasWorker, modelHandle } from './model-status.js';

/** How long the workflow may take to accept an update: it needs a worker to run the validator. */
export const ACCEPT_TIMEOUT_MS = 30_000;

/** Sends `update` and waits until the workflow accepted (or rejected) it; the outcome is read with `result()`. */
export async function sendUpdate<Ret, Arg>(
  client: Client,
  ref: ModelRef,
  update: UpdateDefinition<Ret, [Arg]>,
  arg: Arg,
  acceptTimeoutMs = ACCEPT_TIMEOUT_MS,
): Promise<WorkflowUpdateHandle<Ret>> {
  return accepted(client, ref, update.name, acceptTimeoutMs, () =>
    modelHandle(client, ref).startUpdate(update, { args: [arg], waitForStage: 'ACCEPTED' }),
  );
}

/**
 * Runs `send` (a call that returns once an update is accepted) with a deadline. Running out of time says whether
 * any worker serves the model's cluster (no worker, no validator); a rejection becomes a typed error.
 */
export async function accepted<Ret>(
  client: Client,
  ref: ModelRef,
  updateName: string,
  acceptTimeoutMs: number,
  send: () => Promise<WorkflowUpdateHandle<Ret>>,
): Promise<WorkflowUpdateHandle<Ret>> {
  try {
    return await client.withAbortSignal(AbortSignal.timeout(acceptTimeoutMs), send);
  } catch (err) {
    if (isTimeout(err)) {
      const taskQueue = taskQueueFor(ref.cluster);
      if (!(await hasWorker(client, taskQueue))) throw new NoWorkerError(ref, taskQueue);
      throw new WaitTimeoutError(ref, acceptTimeoutMs, `accept the ${updateName} request`);
    }
    throw updateError(err, ref);
  }
}

/** The outcome of an accepted update, with a rejection turned into a typed error. */
export async function updateOutcome<Ret>(handle: WorkflowUpdateHandle<Ret>, ref: ModelRef): Promise<Ret> {
  try {
    return await handle.result();
  } catch (err) {
    throw updateError(err, ref);
  }
}

/** Whether `err` is a request that ran out of time or was aborted (not a failure of the update itself). */
export function isTimeout(err: unknown): boolean {
  return (
    err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isGrpcCancelledError(err) || isGrpcDeadlineError(err)
  );
}

function updateError(err: unknown, ref: ModelRef): unknown {
  if (err instanceof WorkflowNotFoundError) {
    return new ModelNotFoundError(ref, 'not running (never served, or already deleted)');
  }
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    const failure = err.cause;
    if (failure.type === INVALID_SPEC) {
      const issues = Array.isArray(failure.details?.[0]) ? (failure.details[0] as SpecIssue[]) : undefined;
      return new InvalidSpecError(issues ?? [{ path: '(document)', message: failure.message }], 'workflow', {
        cause: err,
      });
    }
    if (failure.type === MODEL_DELETING) return new ModelDeletedError(ref, 'Deleting');
  }
  return err;
}
