// Listing models through Temporal visibility: the search attributes every model's workflow keeps up to date.
import type { Client } from '@temporalio/client';
import {
  ferryClusterKey,
  ferryModelKey,
  ferryNamespaceKey,
  ferryPhaseKey,
  type ModelRef,
  type ModelStatus,
  type Phase,
} from '../workflows/contract/index.js';
import { queryStatus } from './model-status.js';
import { WORKFLOW_TYPE } from './serve-model.js';

export interface ListFilter {
  phase?: Phase | Phase[];
  namespace?: string;
  cluster?: string;
  name?: string;
  /** Include models whose workflow has closed (deleted ones). Default false: running workflows only. */
  includeClosed?: boolean;
}

export interface ListOptions {
  /** Also read each model's status query (in parallel, a few seconds at most each). Default false. */
  withStatus?: boolean;
  /** At most this many models. Default 1,000. */
  limit?: number;
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
  const models: ModelSummary[] = [];
  for await (const info of client.workflow.list({ query: listQuery(filter), pageSize: Math.min(limit, 1_000) })) {
    const attrs = info.typedSearchAttributes;
    const name = attrs.get(ferryModelKey);
    const namespace = attrs.get(ferryNamespaceKey);
    const cluster = attrs.get(ferryClusterKey);
    // A workflow without Ferry's identity attributes was not started by Ferry's client or workflow: skip it.
    if (!name || !namespace || !cluster) continue;
    models.push({
      name,
      namespace,
      cluster,
      phase: (attrs.get(ferryPhaseKey) ?? 'Pending') as Phase,
      workflowId: info.workflowId,
      runId: info.runId,
      execution: info.status.name,
      startedAt: info.startTime,
    });
    if (models.length >= limit) break;
  }
  if (options.withStatus) await addStatuses(client, models);
  return models;
}

async function addStatuses(client: Client, models: ModelSummary[]): Promise<void> {
  const queue = models.filter((m) => m.execution === 'RUNNING');
  const worker = async () => {
    for (let model = queue.shift(); model; model = queue.shift()) {
      try {
        model.status = await queryStatus(client, model, { timeoutMs: STATUS_QUERY_TIMEOUT_MS, runId: model.runId });
        model.phase = model.status.phase;
      } catch {
        // Unanswered (no worker, slow worker): the search attribute's phase stands.
      }
    }
  };
  await Promise.all(Array.from({ length: STATUS_CONCURRENCY }, worker));
}
