// The replay gate: `ferry-worker --replay-check DIR` replays every workflow history in DIR on this build's workflow
// code, and fails when any does not replay. Run it with the histories of the open runs before new code takes their
// work (docs/upgrading.md): a nondeterminism error here is one that would otherwise stop those models' workflows.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root.js';
import type { Client } from '@temporalio/client';
import { Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { modelRefOf, workflowIdFor, type ServedModel } from '../workflows/contract/index.js';
import { modelEventsSinks } from './model-events.js';

type History = proto.temporal.api.history.v1.IHistory;
const HistoryMessage = proto.temporal.api.history.v1.History;

// ProtoJSON (what the CLI and the Web UI write) is read with the protojson of @temporalio/proto's own protobufjs: the
// SDK's `historyFromJSON` takes another copy's, which with this lock file refuses the types ("type must be a Type").
const protoRequire = createRequire(createRequire(import.meta.url).resolve('@temporalio/proto'));
const protojson = protoRequire('protobufjs/ext/protojson') as {
  fromJson(type: unknown, json: unknown, options: { ignoreUnknownFields: boolean }): History | null;
};
const historyType = patchProtobufRoot(proto as unknown as Record<string, unknown>) as unknown as {
  lookupType(name: string): unknown;
};

/** Older exports name enum values short (`WorkflowExecutionStarted`); ProtoJSON wants `EVENT_TYPE_WORKFLOW_…`. */
function constantCase(value: unknown, prefix: string): unknown {
  if (typeof value !== 'string' || value.startsWith(prefix)) return value;
  return `${prefix}_${value.replace(/(?<!^)([A-Z])/g, '_$1').toUpperCase()}`;
}

function fromProtoJson(json: { events: Record<string, unknown>[] }): History {
  const events = json.events.map((event) => {
    const attributesKey = Object.keys(event).find((k) => k.endsWith('EventAttributes'));
    const attributes = attributesKey ? (event[attributesKey] as Record<string, unknown>) : undefined;
    const fixed: Record<string, unknown> = { ...attributes };
    for (const [field, prefix] of [
      ['parentClosePolicy', 'PARENT_CLOSE_POLICY'],
      ['workflowIdReusePolicy', 'WORKFLOW_ID_REUSE_POLICY'],
      ['initiator', 'CONTINUE_AS_NEW_INITIATOR'],
      ['retryState', 'RETRY_STATE'],
    ] as const) {
      if (fixed[field] !== undefined) fixed[field] = constantCase(fixed[field], prefix);
    }
    const queue = fixed.taskQueue as { kind?: unknown } | undefined;
    if (queue?.kind !== undefined) fixed.taskQueue = { ...queue, kind: constantCase(queue.kind, 'TASK_QUEUE_KIND') };
    return {
      ...event,
      eventType: constantCase(event.eventType, 'EVENT_TYPE'),
      ...(attributesKey ? { [attributesKey]: fixed } : {}),
    };
  });
  const type = historyType.lookupType('temporal.api.history.v1.History');
  const history = protojson.fromJson(type, { ...json, events }, { ignoreUnknownFields: true });
  if (!history) throw new Error('empty history');
  return history;
}

export interface ReplayOutcome {
  file: string;
  workflowId: string;
  workflowType?: string;
  /** Why it did not replay; absent when it did. */
  error?: string;
}

/** Thrown when DIR cannot be read, holds no history, or a file is not one. */
export class ReplayInputError extends Error {
  override readonly name = 'ReplayInputError';
}

/**
 * A history file as `temporal workflow show --output json` writes it (proto3 JSON: timestamps as text), or as Ferry's
 * own test/histories keeps them (protobufjs' object form: timestamps as seconds and nanos).
 */
function parseHistoryFile(text: string, file: string): History {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ReplayInputError(`${file}: not JSON (${(err as Error).message})`);
  }
  const events = (json as { events?: unknown[] } | null)?.events;
  if (!Array.isArray(events) || events.length === 0) {
    throw new ReplayInputError(`${file}: not a workflow history (no "events")`);
  }
  const first = events[0] as { eventTime?: unknown };
  try {
    return typeof first.eventTime === 'string'
      ? fromProtoJson(json as { events: Record<string, unknown>[] })
      : HistoryMessage.fromObject(json as Record<string, unknown>);
  } catch (err) {
    throw new ReplayInputError(`${file}: not a workflow history (${(err as Error).message})`);
  }
}

function startedBy(history: History): { workflowType?: string } {
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  return { workflowType: started?.workflowType?.name ?? undefined };
}

/**
 * The id a history's run had, when its input says it (a ServeModelWorkflow's is its model's: the ids of its children
 * derive from it, so a replay under another id fails); otherwise `fallback`. An input a codec encoded says nothing.
 */
export function workflowIdOf(history: History, fallback: string): string {
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload?.data) return fallback;
  try {
    const input = JSON.parse(Buffer.from(payload.data).toString('utf8')) as { spec?: ServedModel };
    const { spec } = input;
    return spec?.metadata?.name && spec.metadata.namespace && spec.spec?.cluster
      ? workflowIdFor(modelRefOf(spec))
      : fallback;
  } catch {
    return fallback;
  }
}

/** A history to replay, and what to call it in the report. */
interface NamedHistory {
  file: string;
  workflowId: string;
  workflowType?: string;
  history: History;
}

/**
 * Replays the open runs on `taskQueue` that would replay on this build at their next workflow task: every run but the
 * pinned ones (Worker Versioning: a pinned run replays only on its own version, and moves to a new one by
 * continue-as-new). Fetched from Temporal; one outcome per run, and how many pinned runs were left out.
 */
export async function replayOpenRuns(
  client: Client,
  taskQueue: string,
  workflowBundle: WorkflowBundleOption,
): Promise<{ outcomes: ReplayOutcome[]; pinned: number }> {
  const open = `TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'`;
  // Pinned runs, by the search attribute the server keeps (an unversioned run has none).
  const pinnedRuns = new Set<string>();
  for await (const run of client.workflow.list({
    query: `${open} AND TemporalWorkflowVersioningBehavior = 'Pinned'`,
  })) {
    pinnedRuns.add(run.runId);
  }
  const histories: NamedHistory[] = [];
  for await (const run of client.workflow.list({ query: open })) {
    if (pinnedRuns.has(run.runId)) continue;
    const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    histories.push({
      file: `${run.workflowId} (run ${run.runId})`,
      workflowId: run.workflowId,
      history,
      workflowType: run.type,
    });
  }
  const pinned = pinnedRuns.size;
  return { outcomes: await replayAll(histories, workflowBundle), pinned };
}

/** Replays every `*.json` history in `dir`; one outcome per file, in file order. */
export async function replayCheck(dir: string, workflowBundle: WorkflowBundleOption): Promise<ReplayOutcome[]> {
  let files: string[];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort();
  } catch (err) {
    throw new ReplayInputError(`cannot read ${dir}: ${(err as Error).message}`);
  }
  if (files.length === 0) throw new ReplayInputError(`${dir} holds no history (*.json)`);
  const histories = files.map((file) => {
    const history = parseHistoryFile(readFileSync(join(dir, file), 'utf8'), file);
    return { file, workflowId: workflowIdOf(history, file.replace(/\.json$/, '')), history, ...startedBy(history) };
  });
  return await replayAll(histories, workflowBundle);
}

async function replayAll(histories: NamedHistory[], workflowBundle: WorkflowBundleOption): Promise<ReplayOutcome[]> {
  const outcomes: ReplayOutcome[] = [];
  const sinks = modelEventsSinks({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
  const results = Worker.runReplayHistories({ workflowBundle, sinks }, histories);
  let i = 0;
  for await (const result of results) {
    const { file, workflowId, workflowType } = histories[i++]!;
    outcomes.push({
      file,
      workflowId,
      ...(workflowType ? { workflowType } : {}),
      ...(result.error ? { error: String(result.error.message ?? result.error) } : {}),
    });
  }
  return outcomes;
}
