// Moving a served model to another cluster (docs/design/fleet.md, §3): MoveModelWorkflow, started on the target
// cluster's worker with the model's spec as it runs, serves it on the target, waits for Ready there, then deletes the
// source. One move of a name at a time; a move can be aborted until its teardown begins. The source's cluster need
// not have a worker: its spec then comes from its history or the caller, and its delete waits in its workflow.
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import type { MoveModelWorkflow } from '../workflows/move.js';
import {
  describeRef,
  moveStatusQuery,
  moveWorkflowIdFor,
  taskQueueFor,
  type ModelRef,
  type MoveModelResult,
  type MoveStatus,
} from '../workflows/contract/index.js';
import { FerryClientError, NoWorkerError } from './errors.js';
import { describeModel, hasWorker } from './model-status.js';
import { sourceDocument } from './source-document.js';
import { defaultReadyTimeoutMs } from './serve-model.js';

/** A move that cannot start: the same cluster, a name taken there, a move already under way, or no worker there. */
export class MoveRefusedError extends FerryClientError {
  override readonly name = 'MoveRefusedError';
}

/** A move that ended without moving the model: the target failed or was not Ready in time, or it was aborted. */
export class MoveFailedError extends FerryClientError {
  override readonly name = 'MoveFailedError';

  constructor(
    /** The failure's type (`ServeFailed`, `ReadyTimeout`, … or `Cancelled`), as the move's status has it. */
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export type MoveHandle = WorkflowHandle<typeof MoveModelWorkflow>;

export interface MoveOptions {
  /** How long the target may take to be Ready; default: its download deadline and startup timeout, and 10 min. */
  readyTimeoutMs?: number;
  /** How long to wait for the source's teardown before completing with it pending (default 10 min). */
  teardownTimeoutMs?: number;
  /**
   * The model's document, to serve on the target as it is (it must name the same model). Unset: the source's spec as
   * it runs, from its worker, or from its history when no worker of the source's cluster answers (source-document.ts).
   */
  document?: unknown;
}

/** The move's workflow, for a model `namespace/name` (whichever clusters). */
export function moveHandle(client: Client, ref: Pick<ModelRef, 'namespace' | 'name'>, runId?: string): MoveHandle {
  return client.workflow.getHandle<typeof MoveModelWorkflow>(moveWorkflowIdFor(ref), runId);
}

/**
 * Starts moving the running model `from` to cluster `to`, and returns the move's handle (`await handle.result()` for
 * its `MoveModelResult`). Refused, with nothing started: the model is not running, `to` is its own cluster, a model of
 * that name runs on `to`, a move of the name is under way, or no worker serves `to`.
 */
export async function startMove(
  client: Client,
  from: ModelRef,
  to: string,
  options: MoveOptions = {},
): Promise<MoveHandle> {
  if (to === from.cluster) throw new MoveRefusedError(`${describeRef(from)} is on cluster ${to} already`);
  const execution = await describeModel(client, from);
  if (execution.status.name !== 'RUNNING') throw new MoveRefusedError(`${describeRef(from)} is not served (deleted)`);
  // Before the target's check: a move under way has started the target already.
  const moving = await moveHandle(client, from)
    .describe()
    .catch(() => undefined);
  if (moving?.status.name === 'RUNNING') throw underWay(from);
  const target: ModelRef = { ...from, cluster: to };
  const there = await describeModel(client, target).catch(() => undefined);
  if (there?.status.name === 'RUNNING') {
    throw new MoveRefusedError(`${describeRef(target)} is served already: delete it, or move to another cluster`);
  }
  if (!(await hasWorker(client, taskQueueFor(to)))) throw new NoWorkerError(target, taskQueueFor(to));
  const document = await sourceDocument(client, from, options.document);
  try {
    return await client.workflow.start<typeof MoveModelWorkflow>('MoveModelWorkflow', {
      workflowId: moveWorkflowIdFor(from),
      // The target's: its worker is there (checked above), and the move's activities are client calls any worker
      // makes; the source's may be gone, which is when a move is most wanted.
      taskQueue: taskQueueFor(to),
      args: [
        {
          from,
          to,
          document,
          readyTimeoutMs: options.readyTimeoutMs ?? defaultReadyTimeoutMs(document),
          ...(options.teardownTimeoutMs !== undefined ? { teardownTimeoutMs: options.teardownTimeoutMs } : {}),
        },
      ],
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw underWay(from);
    throw err;
  }
}

const underWay = (ref: ModelRef) =>
  new MoveRefusedError(
    `a move of ${ref.namespace}/${ref.name} is under way (${moveWorkflowIdFor(ref)}): wait for it, or abort it`,
  );

/** Moves the model and waits until the move is done: the target Ready, the source deleted. */
export async function moveModel(
  client: Client,
  from: ModelRef,
  to: string,
  options: MoveOptions = {},
): Promise<MoveModelResult> {
  return await moveResult(await startMove(client, from, to, options));
}

/** The move's result; a move that failed or was aborted rejects with `MoveFailedError`, naming why. */
export async function moveResult(handle: MoveHandle): Promise<MoveModelResult> {
  try {
    return await handle.result();
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    const cause = err.cause as { type?: string; name?: string; message?: string } | undefined;
    const reason = cause?.type ?? (cause?.name === 'CancelledFailure' ? 'Cancelled' : (cause?.name ?? 'Failed'));
    const message = reason === 'Cancelled' ? 'the move was aborted before the switch' : (cause?.message ?? err.message);
    throw new MoveFailedError(reason, message);
  }
}

/** Where the model's latest move is: its step, timeline and, once the target is Ready, its endpoint. */
export async function moveStatus(client: Client, ref: Pick<ModelRef, 'namespace' | 'name'>): Promise<MoveStatus> {
  try {
    return await moveHandle(client, ref).query(moveStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) {
      throw neverMoved(ref);
    }
    throw err;
  }
}

/**
 * Aborts the model's move under way: the target is deleted and the source left as it was, if the move has not begun
 * its teardown; after that the move completes whatever is asked. Waits until the move has ended; returns its status.
 */
export async function abortMove(client: Client, ref: Pick<ModelRef, 'namespace' | 'name'>): Promise<MoveStatus> {
  const handle = moveHandle(client, ref);
  const execution = await handle.describe().catch((err: unknown) => {
    if (err instanceof WorkflowNotFoundError) throw neverMoved(ref);
    throw err;
  });
  if (execution.status.name !== 'RUNNING') {
    const last = await handle.query(moveStatusQuery).catch(() => undefined);
    throw new MoveRefusedError(
      `no move of ${ref.namespace}/${ref.name} is under way${last ? `: the last one ended ${last.step}` : ''}`,
    );
  }
  await handle.cancel();
  await handle.result().catch(() => undefined);
  return await handle.query(moveStatusQuery);
}

const neverMoved = (ref: Pick<ModelRef, 'namespace' | 'name'>) =>
  new FerryClientError(`${ref.namespace}/${ref.name} has never been moved`);
