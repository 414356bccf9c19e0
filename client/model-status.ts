// Reading a model's status: the `status` query of a running workflow, the final status of a deleted one.
import {
  isGrpcDeadlineError,
  isGrpcServiceError,
  QueryNotRegisteredError,
  ServiceError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
} from '@temporalio/client';
import { ApplicationFailure, type QueryDefinition } from '@temporalio/common';
import type { ServeModelWorkflow } from '../workflows/serve-model.js';
import {
  type FinalStatus,
  type ModelRef,
  type ModelStatus,
  statusQuery,
  taskQueueFor,
  workflowIdFor,
} from '../workflows/contract/index.js';
import { ModelNotFoundError, ModelWorkflowClosedError, NoWorkerError } from './errors.js';

export type ModelHandle = WorkflowHandle<typeof ServeModelWorkflow>;

/** How long one status query may take: a query waits for a worker, and without one it would wait 30 s or more. */
const QUERY_TIMEOUT_MS = 10_000;

/** A handle to the model's workflow (its latest run unless `runId` is given). */
export function modelHandle(client: Client, ref: ModelRef, runId?: string): ModelHandle {
  return client.workflow.getHandle<typeof ServeModelWorkflow>(workflowIdFor(ref), runId);
}

/** The workflow's execution, or `ModelNotFoundError` when there never was one. */
export async function describeModel(client: Client, ref: ModelRef): Promise<WorkflowExecutionDescription> {
  try {
    return await modelHandle(client, ref).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new ModelNotFoundError(ref);
    throw err;
  }
}

/** The status query of the model's current run; `NoWorkerError` when it cannot be answered for want of a worker. */
export function queryStatus(client: Client, ref: ModelRef, options: QueryOptions = {}): Promise<ModelStatus> {
  return queryModel(client, ref, statusQuery, options);
}

export interface QueryOptions {
  /** Default `QUERY_TIMEOUT_MS`. */
  timeoutMs?: number;
  /** A given run (default: the latest). */
  runId?: string;
}

/** Runs `query` on the model's workflow with a deadline; `NoWorkerError` when no worker polls its task queue. */
export async function queryModel<T>(
  client: Client,
  ref: ModelRef,
  query: QueryDefinition<T, []>,
  { timeoutMs = QUERY_TIMEOUT_MS, runId }: QueryOptions = {},
): Promise<T> {
  try {
    return await client.withDeadline(Date.now() + timeoutMs, () => modelHandle(client, ref, runId).query(query));
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new ModelNotFoundError(ref);
    // Without a worker the server fails the query in more than one way (a deadline, or "Failed to query Workflow"
    // under load): whichever it is, say what is missing.
    const serverSide = isGrpcDeadlineError(err) || err instanceof ServiceError || isGrpcServiceError(err);
    if (serverSide && !(await hasWorker(client, taskQueueFor(ref.cluster)).catch(() => true))) {
      throw new NoWorkerError(ref, taskQueueFor(ref.cluster));
    }
    throw err;
  }
}

// Values of temporal.api.enums.v1 (the proto package is not a direct dependency).
const TASK_QUEUE_KIND_NORMAL = 1;
const TASK_QUEUE_TYPE_WORKFLOW = 1;

/** True when some worker polls `taskQueue` for workflow tasks. */
export async function hasWorker(client: Client, taskQueue: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: TASK_QUEUE_KIND_NORMAL },
    taskQueueType: TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (response.pollers?.length ?? 0) > 0;
}

/**
 * The model's status: live from a running workflow, the final status (phase Deleted) of one that completed.
 * `ModelNotFoundError` if it never existed; `ModelWorkflowClosedError` if its workflow was terminated or failed
 * and no worker can replay it.
 */
export async function getModelStatus(client: Client, ref: ModelRef): Promise<ModelStatus> {
  const execution = await describeModel(client, ref);
  return await statusOfExecution(client, ref, execution);
}

/** The status of the run `execution` describes. */
async function statusOfExecution(
  client: Client,
  ref: ModelRef,
  execution: WorkflowExecutionDescription,
): Promise<ModelStatus> {
  const state = execution.status.name;
  if (state === 'RUNNING') {
    try {
      return await queryStatus(client, ref, { runId: execution.runId });
    } catch (err) {
      // A run that failed at its start (a spec its worker refuses) has closed since it was described, and registered
      // no query handler: say why it failed rather than what the query lacked.
      if (!(err instanceof QueryNotRegisteredError)) throw err;
      const now = await describeModel(client, ref);
      if (now.status.name === 'RUNNING') throw err;
      return await statusOfExecution(client, ref, now);
    }
  }
  if (state === 'COMPLETED') {
    const final: FinalStatus = await modelHandle(client, ref, execution.runId).result();
    return final.status;
  }
  // Terminated, failed or timed out: a worker can still replay the history to answer the query.
  try {
    return await queryStatus(client, ref, { runId: execution.runId });
  } catch (err) {
    if (err instanceof ModelNotFoundError) throw err;
    throw new ModelWorkflowClosedError(ref, state, await failureOf(client, ref, execution.runId));
  }
}

/** The failure a closed run ended with, in Ferry's words (type and message); undefined for any other ending. */
async function failureOf(
  client: Client,
  ref: ModelRef,
  runId: string,
): Promise<{ type?: string; message: string } | undefined> {
  try {
    await modelHandle(client, ref, runId).result();
    return undefined;
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) return undefined;
    const cause = err.cause;
    if (cause instanceof ApplicationFailure)
      return { ...(cause.type ? { type: cause.type } : {}), message: cause.message };
    return cause ? { message: cause.message } : undefined;
  }
}

/** gRPC's UNAVAILABLE status code (the enum lives in @grpc/grpc-js, which Ferry does not depend on directly). */
const GRPC_UNAVAILABLE = 14;

/** True when `err` (or a cause) says the server is unreachable. */
export function isUnavailable(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if (isGrpcServiceError(e) && Number(e.code) === GRPC_UNAVAILABLE) return true;
  }
  return false;
}
