// Start serving a model: one ServeModelWorkflow per model, idempotent for the same spec.
import { WorkflowIdConflictPolicy, type Client } from '@temporalio/client';
import type { ServeModelWorkflow } from '../workflows/serve-model.js';
import {
  describeSource,
  type ModelRef,
  modelRefOf,
  type ModelStatus,
  parseDuration,
  searchAttributesFor,
  type ServedModel,
  type ServeModelInput,
  type ServeModelOptions,
  specChanges,
  specQuery,
  taskQueueFor,
  CLAIM_MEMO,
  TENANT_MEMO,
  workflowIdFor,
} from '../workflows/contract/index.js';
import { parseServingDocument } from './document.js';
import { ModelDeletedError, SpecConflictError } from './errors.js';
import { placeDocument, type Placement } from './place-model.js';
import { modelHandle, queryModel, queryStatus, type ModelHandle } from './model-status.js';
import { waitForPhase } from './wait-for-phase.js';

/** The workflow type, as registered by the worker. */
export const WORKFLOW_TYPE = 'ServeModelWorkflow';

export interface ServeOptions {
  /** Resolve only once the model is Ready (rejects with `ModelFailedError` if it fails). */
  wait?: boolean;
  /** How long `wait` may take. Default: the spec's download deadline plus its startup timeout plus 10 minutes. */
  timeoutMs?: number;
  /** Called with every new status while waiting. */
  onStatus?: (status: ModelStatus) => void;
  /** Workflow knobs (watch interval, retries); production leaves them unset. */
  workflowOptions?: ServeModelOptions;
}

export interface ServeResult {
  ref: ModelRef;
  workflowId: string;
  runId: string;
  /** False when the model was already served with this same spec: its running workflow is returned. */
  started: boolean;
  /** The Ready status, with `wait`. */
  status?: ModelStatus;
  handle: ModelHandle;
  /** With `spec.placement`: the cluster the model went to, and why. */
  placement?: Placement;
}

/**
 * Validates `doc` (a ServedModel document as people write it) and starts its workflow. Starting the same spec again
 * returns the running workflow; a different spec for a running model throws `SpecConflictError` (use `updateModel`).
 * Throws `InvalidSpecError` listing every problem before anything is started. With `spec.placement`: on the listed
 * cluster that serves the model already, else on the one placed now (`NoCapacityError`, nothing started, if none).
 */
export async function serveModel(client: Client, doc: unknown, options: ServeOptions = {}): Promise<ServeResult> {
  const { spec, placement } = await placedSpec(client, doc);
  const ref = modelRefOf(spec);
  const workflowId = workflowIdFor(ref);
  const previousRunId = await runningRunId(client, ref);
  const handle = await client.workflow.start<typeof ServeModelWorkflow>(
    WORKFLOW_TYPE,
    startOptionsFor(spec, options.workflowOptions, { requestedBy: client.options.identity }),
  );
  // With USE_EXISTING the returned run is the running one. Ours needs no check; one that ran before is compared
  // with what it is being brought to (a start racing ours between describe and start would pass unchecked).
  const runId = handle.firstExecutionRunId;
  if (runId === previousRunId) await assertSameSpec(client, ref, spec, runId);

  const result: ServeResult = {
    ref,
    workflowId,
    runId,
    started: runId !== previousRunId,
    handle,
    ...(placement ? { placement } : {}),
  };
  if (!options.wait) return result;
  const status = await waitForPhase(client, ref, ['Ready'], {
    timeoutMs: options.timeoutMs ?? defaultReadyTimeoutMs(spec),
    onStatus: options.onStatus,
  });
  return { ...result, status };
}

/**
 * The document's spec as its model's workflow serves it: with `spec.placement`, on the listed cluster that serves it
 * already, else on the one placed now (`NoCapacityError` when none has room); the document too, to send as it is.
 */
export async function placedSpec(
  client: Client,
  doc: unknown,
): Promise<{ spec: ServedModel; doc: unknown; placement?: Placement }> {
  const parsed = parseServingDocument(doc);
  if (!parsed.spec.placement) return { spec: parsed, doc };
  const placed = await placeDocument(client, doc, parsed);
  return { ...placed, spec: parseServingDocument(placed.doc) };
}

/** How long a model may take to become Ready by its own budgets: download deadline + startup timeout + 10 min. */
export function defaultReadyTimeoutMs(spec: ServedModel): number {
  return parseDuration(spec.spec.puller.deadline) + parseDuration(spec.spec.engine.startupTimeout) + 10 * 60_000;
}

/** Throws unless the running model is being brought to `spec` (and not being deleted). */
async function assertSameSpec(client: Client, ref: ModelRef, spec: ServedModel, runId: string): Promise<void> {
  const [status, running] = await Promise.all([
    queryStatus(client, ref, { runId }),
    queryModel(client, ref, specQuery, { runId }),
  ]);
  if (status.phase === 'Deleting' || status.phase === 'Deleted') {
    throw new ModelDeletedError(
      ref,
      status.phase,
      'wait until it is deleted (`ferry delete --wait`), then serve it again',
    );
  }
  const changes = specChanges(running, spec);
  if (changes.length > 0) throw new SpecConflictError(ref, changes);
}

/**
 * How a model's workflow is started. With USE_EXISTING, starting the same model twice is one workflow: the second
 * start returns the running one, which the caller compares with what it asked for.
 */
export function startOptionsFor(
  spec: ServedModel,
  workflowOptions?: ServeModelOptions,
  owner: { tenant?: string; requestedBy?: string } = {},
  /** Start only (FAIL when the model runs), the claim kept in the memo (`applyModel`'s `claim`). */
  claim?: string,
) {
  const ref = modelRefOf(spec);
  const { tenant, requestedBy } = owner;
  const input: ServeModelInput = {
    version: 1,
    spec,
    ...(workflowOptions ? { options: workflowOptions } : {}),
    ...(tenant !== undefined ? { tenant } : {}),
    ...(requestedBy !== undefined ? { requestedBy } : {}),
  };
  return {
    // The owner, where a describe or a list reads it without asking the workflow (the tenants' Nexus handler).
    ...(tenant !== undefined || claim !== undefined
      ? {
          memo: {
            ...(tenant !== undefined ? { [TENANT_MEMO]: tenant } : {}),
            ...(claim !== undefined ? { [CLAIM_MEMO]: claim } : {}),
          },
        }
      : {}),
    workflowId: workflowIdFor(ref),
    taskQueue: taskQueueFor(ref.cluster),
    args: [input] as [ServeModelInput],
    workflowIdConflictPolicy:
      claim === undefined ? WorkflowIdConflictPolicy.USE_EXISTING : WorkflowIdConflictPolicy.FAIL,
    typedSearchAttributes: searchAttributesFor(ref, 'Pending'),
    staticSummary: summaryOf(spec),
    staticDetails: detailsOf(spec),
  };
}

/** The run id of the model's running workflow, if one is running. */
export async function runningRunId(client: Client, ref: ModelRef): Promise<string | undefined> {
  try {
    const execution = await modelHandle(client, ref).describe();
    return execution.status.name === 'RUNNING' ? execution.runId : undefined;
  } catch {
    // Not found (or not readable): the start below tells.
    return undefined;
  }
}

/** One line for the Web UI's workflow list. */
function summaryOf(spec: ServedModel): string {
  return `${spec.metadata.namespace}/${spec.metadata.name} on ${spec.spec.cluster}: ${describeSource(spec.spec.source)}`;
}

/** The spec the model was started with, for the Web UI (updates show in its current details). */
function detailsOf(spec: ServedModel): string {
  const { engine, resources, replicas, slo, inferencePool } = spec.spec;
  const goal = slo
    ? [
        `- latency goal: ttft ≤ ${slo.ttft} and itl ≤ ${slo.itl} for ${Math.round(slo.attainment * 100)}%, measured with ` +
          `${slo.workload.promptTokens}-token prompts and ${slo.workload.outputTokens}-token answers; ` +
          (slo.admission ? 'above it each replica answers 429' : 'measured only'),
      ]
    : [];
  const pool = inferencePool
    ? [`- InferencePool \`${spec.metadata.name}\`, endpoint picker \`${inferencePool.endpointPicker.name}\``]
    : [];
  return [
    `**ServedModel** \`${spec.metadata.namespace}/${spec.metadata.name}\` on cluster \`${spec.spec.cluster}\` (as started)`,
    '',
    `- source: \`${describeSource(spec.spec.source)}\``,
    `- engine: \`${engine.image}\`, served as \`${engine.servedModelName}\` on port ${engine.port}`,
    `- resources: ${resources.gpus} × \`${resources.gpuResource}\`, ${resources.cpu} CPU, ${resources.memory} memory`,
    `- replicas: ${replicas}`,
    ...goal,
    ...pool,
  ].join('\n');
}
