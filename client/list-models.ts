// Listing models through Temporal visibility: the search attributes every model's workflow keeps up to date.
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import {
  ferryClusterKey,
  ferryModelKey,
  ferryNamespaceKey,
  ferryPhaseKey,
  type ModelRef,
  type ModelStatus,
  type Phase,
  specQuery,
} from '../workflows/contract/index.js';
import { type LabelRequirement, matchesSelector, parseLabelSelector } from './label-selector.js';
import { queryModel, queryStatus } from './model-status.js';
import { WORKFLOW_TYPE } from './serve-model.js';

export interface ListFilter {
  phase?: Phase | Phase[];
  namespace?: string;
  cluster?: string;
  name?: string;
  /** Include models whose workflow has closed (deleted ones). Default false: running workflows only. */
  includeClosed?: boolean;
  /** A label selector as kubectl's `-l` (`team=chat,tier in (gold)`), matched against `metadata.labels`. */
  selector?: string;
}

export interface ListOptions {
  /** Also read each model's status query (in parallel, a few seconds at most each). Default false. */
  withStatus?: boolean;
  /** At most this many models. Default 1,000. */
  limit?: number;
  /** With a `selector`: told of each model left out because its labels could not be read (no worker answered). */
  onUnreadLabels?: (model: ModelSummary, error: unknown) => void;
}

export interface ModelSummary extends ModelRef {
  /** From the status query when `withStatus` read it, else from the `FerryPhase` search attribute. */
  phase: Phase;
  workflowId: string;
  runId: string;
  /** Temporal's execution status: RUNNING, COMPLETED, TERMINATED, … */
  execution: string;
  startedAt: Date;
  /** With `withStatus`, when the query answered. */
  status?: ModelStatus;
  /** With a `selector`: the model's `metadata.labels`. */
  labels?: Record<string, string>;
}

const STATUS_QUERY_TIMEOUT_MS = 3_000;
const STATUS_CONCURRENCY = 8;

/** The visibility query for `filter`. Values are quoted; visibility queries have no parameters. */
export function listQuery(filter: ListFilter): string {
  const quote = (value: string) => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const clauses = [`WorkflowType = ${quote(WORKFLOW_TYPE)}`];
  if (!filter.includeClosed) clauses.push(`ExecutionStatus = 'Running'`);
  const phases = filter.phase === undefined ? [] : Array.isArray(filter.phase) ? filter.phase : [filter.phase];
  if (phases.length === 1) clauses.push(`${ferryPhaseKey.name} = ${quote(phases[0]!)}`);
  if (phases.length > 1) clauses.push(`${ferryPhaseKey.name} IN (${phases.map(quote).join(', ')})`);
  if (filter.namespace) clauses.push(`${ferryNamespaceKey.name} = ${quote(filter.namespace)}`);
  if (filter.cluster) clauses.push(`${ferryClusterKey.name} = ${quote(filter.cluster)}`);
  if (filter.name) clauses.push(`${ferryModelKey.name} = ${quote(filter.name)}`);
  return clauses.join(' AND ');
}

/** Models matching `filter`, newest first. Visibility is eventually consistent: a phase can lag by a second. */
export async function listModels(
  client: Client,
  filter: ListFilter = {},
  options: ListOptions = {},
): Promise<ModelSummary[]> {
  const limit = options.limit ?? 1_000;
  // Checked before anything is asked of Temporal: a bad selector is the caller's mistake, whatever the server says.
  const requirements = filter.selector === undefined ? undefined : parseLabelSelector(filter.selector);
  let models: ModelSummary[] = [];
  for await (const info of client.workflow.list({ query: listQuery(filter), pageSize: Math.min(limit, 1_000) })) {
    const model = summaryOf(info);
    // A workflow without Ferry's identity attributes was not started by Ferry's client or workflow: skip it.
    if (!model) continue;
    models.push(model);
    if (models.length >= limit) break;
  }
  if (requirements) models = await withLabels(client, models, requirements, options.onUnreadLabels);
  if (options.withStatus) await addStatuses(client, models);
  return models;
}

/** A model as visibility describes its workflow, or undefined for a workflow without Ferry's search attributes. */
export function summaryOf(
  info: Pick<WorkflowExecutionInfo, 'typedSearchAttributes' | 'workflowId' | 'runId' | 'status' | 'startTime'>,
): ModelSummary | undefined {
  const attrs = info.typedSearchAttributes;
  const name = attrs.get(ferryModelKey);
  const namespace = attrs.get(ferryNamespaceKey);
  const cluster = attrs.get(ferryClusterKey);
  if (!name || !namespace || !cluster) return undefined;
  return {
    name,
    namespace,
    cluster,
    phase: (attrs.get(ferryPhaseKey) ?? 'Pending') as Phase,
    workflowId: info.workflowId,
    runId: info.runId,
    execution: info.status.name,
    startedAt: info.startTime,
  };
}

/**
 * The models whose labels meet `requirements`. Visibility has no label attribute, and one would need the workflow
 * to upsert it (a patch in every running model's history); the `spec` query already answers with the document,
 * labels and all, so each model listed is asked (in parallel, as for its status). A model whose spec cannot be read
 * (no worker, a closed run no worker replays) cannot be said to match: it is left out, and `onUnread` says so.
 */
async function withLabels(
  client: Client,
  models: ModelSummary[],
  requirements: LabelRequirement[],
  onUnread?: (model: ModelSummary, error: unknown) => void,
): Promise<ModelSummary[]> {
  await inParallel(models, async (model) => {
    try {
      const spec = await queryModel(client, model, specQuery, {
        timeoutMs: STATUS_QUERY_TIMEOUT_MS,
        runId: model.runId,
      });
      model.labels = spec.metadata.labels;
    } catch (err) {
      onUnread?.(model, err);
    }
  });
  return models.filter((m) => m.labels !== undefined && matchesSelector(m.labels, requirements));
}

async function addStatuses(client: Client, models: ModelSummary[]): Promise<void> {
  await inParallel(
    models.filter((m) => m.execution === 'RUNNING'),
    async (model) => {
      try {
        model.status = await queryStatus(client, model, { timeoutMs: STATUS_QUERY_TIMEOUT_MS, runId: model.runId });
        model.phase = model.status.phase;
      } catch {
        // Unanswered (no worker, slow worker): the search attribute's phase stands.
      }
    },
  );
}

/** Runs `call` on each model, `STATUS_CONCURRENCY` at a time. */
async function inParallel(models: ModelSummary[], call: (model: ModelSummary) => Promise<void>): Promise<void> {
  const queue = [...models];
  const worker = async () => {
    for (let model = queue.shift(); model; model = queue.shift()) await call(model);
  };
  await Promise.all(Array.from({ length: STATUS_CONCURRENCY }, worker));
}
