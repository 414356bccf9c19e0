// The replay gate: `ferry-worker --replay-check DIR` replays every workflow history in DIR on this build's workflow
// code, and fails when any does not replay. Run it with the histories of the open runs before new code takes their
// work (docs/upgrading.md): a nondeterminism error here is one that would otherwise stop those models' workflows.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import proto from '@temporalio/proto';
import { Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { modelEventsSinks } from './model-events.js';

type History = proto.temporal.api.history.v1.IHistory;
const HistoryMessage = proto.temporal.api.history.v1.History;

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
      ? historyFromJSON(json)
      : HistoryMessage.fromObject(json as Record<string, unknown>);
  } catch (err) {
    throw new ReplayInputError(`${file}: not a workflow history (${(err as Error).message})`);
  }
}

function startedBy(history: History): { workflowType?: string } {
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  return { workflowType: started?.workflowType?.name ?? undefined };
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
    return { file, workflowId: file.replace(/\.json$/, ''), history, ...startedBy(history) };
  });
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
