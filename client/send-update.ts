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
import { randomUUID } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import {
  INVALID_SPEC,
  MODEL_DELETING,
  FAILURE,
  type ModelRef,
  type SpecIssue,
  taskQueueFor,
  workflowIdFor,
} from '../workflows/contract/index.js';
import { ACCEPT_TIMEOUT_MS, type EarlyUpdate } from './early-update.js';
import {
  InvalidSpecError,
  ModelDeletedError,
  ModelNotFoundError,
  NoRolloutError,
  NoWorkerError,
  WaitTimeoutError,
} from './errors.js';
import { hasWorker, modelHandle } from './model-status.js';

export { ACCEPT_TIMEOUT_MS } from './early-update.js';

/**
 * Sends `update` and waits until the workflow accepted (or rejected) it; the outcome is read with `result()`. One
 * update ID for every attempt of one request: a request sent again after the server aborted it cannot apply the
 * update twice.
 */
export async function sendUpdate<Ret, Arg>(
  client: Client,
  ref: ModelRef,
  update: UpdateDefinition<Ret, [Arg]>,
  arg: Arg,
  acceptTimeoutMs = ACCEPT_TIMEOUT_MS,
  early?: EarlyUpdate,
): Promise<WorkflowUpdateHandle<Ret>> {
  const sent = early && early.workflowId === workflowIdFor(ref) && early.updateName === update.name ? early : undefined;
  return accepted(
    client,
    ref,
    update.name,
    acceptTimeoutMs,
    (updateId) => modelHandle(client, ref).startUpdate(update, { args: [arg], waitForStage: 'ACCEPTED', updateId }),
    sent,
  );
}

/**
 * The server aborted the update before the workflow saw it (`Unavailable`, "workflow update was aborted": the
 * workflow task that carried it timed out, say on the queue of a worker that was just lost). Temporal documents it
 * as retryable; the same request is sent again.
 */
function isAbortedUpdate(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 3; depth++) {
    if (e.code === GRPC_UNAVAILABLE) return true;
    e = e.cause as typeof e;
  }
  return false;
}
const GRPC_UNAVAILABLE = 14;
/** Between two tries of an aborted update. */
const ABORTED_RETRY_MS = [250, 500, 1_000, 2_000];

/**
 * The server rejected the update because the workflow task that carried it completed without an answer to it: the
 * worker never saw it (seen when the task was retried on a new worker after the old one was lost). Nothing was
 * applied, so it is sent again, as a new update.
 */
function isUnprocessedUpdate(err: unknown): boolean {
  return (
    err instanceof WorkflowUpdateFailedError &&
    err.cause instanceof ApplicationFailure &&
    err.cause.type === UNPROCESSED_UPDATE
  );
}
const UNPROCESSED_UPDATE = 'UnprocessedUpdate';

/**
 * Runs `send` (a call that returns once an update with the given ID is accepted) with a deadline. Running out of
 * time says whether any worker serves the model's cluster (no worker, no validator); a rejection becomes a typed
 * error. Sent again: with the same ID when the server aborted the request, with a new one when the server rejected
 * it unseen.
 */
export async function accepted<Ret>(
  client: Client,
  ref: ModelRef,
  updateName: string,
  acceptTimeoutMs: number,
  send: (updateId: string) => Promise<WorkflowUpdateHandle<Ret>>,
  early?: EarlyUpdate,
): Promise<WorkflowUpdateHandle<Ret>> {
  const deadline = (early?.sentAt ?? Date.now()) + acceptTimeoutMs;
  let updateId = early?.updateId ?? randomUUID();
  for (let attempt = 0; ; attempt++) {
    const pause = ABORTED_RETRY_MS[Math.min(attempt, ABORTED_RETRY_MS.length - 1)]!;
    try {
      // The update the CLI already sent (early-update.ts), when the workflow accepted it; otherwise the SDK sends it
      // (again, under the same ID: the server answers with the update it already has, if it has it).
      const runId = attempt === 0 && early ? await answerWithin(early, deadline - Date.now()) : undefined;
      const handle = runId
        ? modelHandle(client, ref).getUpdateHandle<Ret>(updateId, { workflowRunId: runId })
        : await client.withAbortSignal(AbortSignal.timeout(Math.max(1, deadline - Date.now())), () => send(updateId));
      if (!(await rejectedUnseen(client, handle))) return handle;
      if (Date.now() + pause >= deadline) {
        throw new WaitTimeoutError(ref, acceptTimeoutMs, `accept the ${updateName} request`);
      }
      updateId = randomUUID();
      await new Promise((resolve) => setTimeout(resolve, pause));
    } catch (err) {
      if (err instanceof WaitTimeoutError) throw err;
      if (isAbortedUpdate(err) && Date.now() + pause < deadline) {
        await new Promise((resolve) => setTimeout(resolve, pause));
        continue;
      }
      if (isTimeout(err) || isAbortedUpdate(err)) {
        const taskQueue = taskQueueFor(ref.cluster);
        if (!(await hasWorker(client, taskQueue))) throw new NoWorkerError(ref, taskQueue);
        throw new WaitTimeoutError(ref, acceptTimeoutMs, `accept the ${updateName} request`);
      }
      throw updateError(err, ref);
    }
  }
}

/** The run that accepted the early update, or `undefined` (the request ended) when no acceptance came within `ms`. */
async function answerWithin(early: EarlyUpdate, ms: number): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
  });
  try {
    const accepted = await Promise.race([early.answer, late]);
    if (accepted === undefined) early.close();
    return accepted?.runId;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether the answer that came with `handle` is the server's rejection of an update the worker never saw. A
 * rejection comes with the answer (the SDK keeps it for `result()`, which then makes no request); an update still
 * running has no outcome yet, and the poll `result()` starts for it is stopped at once.
 */
async function rejectedUnseen(client: Client, handle: WorkflowUpdateHandle<unknown>): Promise<boolean> {
  const stop = new AbortController();
  const outcome = client
    .withAbortSignal(stop.signal, () => handle.result())
    .then(
      () => false,
      (err: unknown) => isUnprocessedUpdate(err),
    );
  const known = await Promise.race([outcome, setImmediate(undefined)]);
  stop.abort();
  return known === true;
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
    // A tenant's change to a model it does not own (docs/security.md).
    if (failure.type === FAILURE.ModelNotFound) return new ModelNotFoundError(ref);
    if (failure.type === FAILURE.NoRolloutWaiting) return new NoRolloutError(failure.message, { cause: err });
  }
  return err;
}
