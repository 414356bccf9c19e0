// A server-side dry run, as kubectl's: the worker of the model's cluster checks the document and builds the objects
// with its own settings, the Kubernetes API server validates each by a dry-run apply, and nothing is created.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, TimeoutFailure, WorkflowFailedError, type Client } from '@temporalio/client';
import type { dryRunModelWorkflow } from '../workflows/dry-run.js';
import {
  describeRef,
  type DryRunResult,
  type ModelRef,
  modelRefOf,
  taskQueueFor,
} from '../workflows/contract/index.js';
import { parseModelDocument } from './document.js';
import { FerryClientError, NoWorkerError } from './errors.js';
import { hasWorker } from './model-status.js';

/** The workflow type, as registered by the worker. */
const DRY_RUN_WORKFLOW_TYPE = 'dryRunModelWorkflow';

/**
 * How long the worker has to answer: its activity tries twice, each within its requests' own retry budget (30 s), so
 * an unreachable API server is reported by the worker itself before this runs out.
 */
const DEFAULT_DRY_RUN_TIMEOUT_MS = 90_000;

export interface DryRunOptions {
  /** How long the worker may take to answer (the dry run's workflow execution timeout). Default 90 s. */
  timeoutMs?: number;
}

export interface DryRunModelResult extends DryRunResult {
  ref: ModelRef;
  /** True when neither the worker nor the API server refused anything: serving the document would start. */
  accepted: boolean;
}

/**
 * Dry-runs `doc` on its cluster: the worker of that cluster parses it with its own rules, checks what it checks
 * before serving (a name someone else's object holds, a pool the cluster cannot hold), and has the API server
 * validate every object it would create. Refusals are in the result (`issues`, each object's `refusal`), not thrown.
 * Throws `InvalidSpecError` for a document this client refuses (nothing is sent), `NoWorkerError` when no worker
 * polls the cluster's task queue, and a `FerryClientError` when the worker fails to answer in time.
 */
export async function dryRunModel(
  client: Client,
  doc: unknown,
  options: DryRunOptions = {},
): Promise<DryRunModelResult> {
  const ref = modelRefOf(parseModelDocument(doc));
  const taskQueue = taskQueueFor(ref.cluster);
  // The common mistake, said at once: a started dry run would only wait out its timeout.
  if (!(await hasWorker(client, taskQueue))) throw new NoWorkerError(ref, taskQueue);
  const timeoutMs = options.timeoutMs ?? DEFAULT_DRY_RUN_TIMEOUT_MS;
  try {
    const result = await client.workflow.execute<typeof dryRunModelWorkflow>(DRY_RUN_WORKFLOW_TYPE, {
      workflowId: `dryrun/${ref.cluster}/${ref.namespace}/${ref.name}/${randomUUID()}`,
      taskQueue,
      args: [{ document: doc }],
      workflowExecutionTimeout: timeoutMs,
      staticSummary: `dry run of ${ref.namespace}/${ref.name} on ${ref.cluster}`,
    });
    return { ...result, ref, accepted: result.issues.length === 0 && result.objects.every((o) => !o.refusal) };
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    throw await unanswered(client, ref, taskQueue, timeoutMs, err);
  }
}

/** Why the worker gave no answer, in words that say what to look at. */
async function unanswered(
  client: Client,
  ref: ModelRef,
  taskQueue: string,
  timeoutMs: number,
  err: WorkflowFailedError,
): Promise<Error> {
  if (err.cause instanceof TimeoutFailure) {
    // The worker that polled a moment ago may have gone since.
    if (!(await hasWorker(client, taskQueue).catch(() => true))) return new NoWorkerError(ref, taskQueue);
    return new FerryClientError(
      `the worker of cluster ${ref.cluster} (task queue ${taskQueue}) did not answer the dry run of ` +
        `${describeRef(ref)} within ${timeoutMs / 1000}s: is it busy, or a Ferry older than this client, without ` +
        'dry runs? Its log says which',
      { cause: err },
    );
  }
  // The activity's own failure (the workflow passes it on): its type names it in the failure catalogue.
  const cause = err.cause;
  const type = cause instanceof ApplicationFailure && cause.type ? `${cause.type}: ` : '';
  const why = cause ? `${type}${cause.message}` : err.message;
  return new FerryClientError(`the worker of cluster ${ref.cluster} could not dry-run ${describeRef(ref)}: ${why}`, {
    cause: err,
  });
}
