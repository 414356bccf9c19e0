// Workflow histories as JSON files for replay tests.
//
// Not `historyToJSON`/`historyFromJSON` from @temporalio/common: with this lock file, @temporalio/common and
// @temporalio/proto each get their own copy of protobufjs 8, and the proto3-JSON helpers of one reject the other's
// types ("type must be a Type"). protobufjs' own object form of the History message is lossless and needs one copy.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { HistoryAndWorkflowId } from '@temporalio/client';
import proto from '@temporalio/proto';
import { workflowIdOf } from '../../worker/replay-check.js';

type History = proto.temporal.api.history.v1.IHistory;
const HistoryMessage = proto.temporal.api.history.v1.History;
const AS_JSON = { longs: String, enums: String, bytes: String } as const;

/** Writes the history of `handle`'s workflow to `file`, and says how many events it holds. */
export async function saveHistory(handle: { fetchHistory(): Promise<History> }, file: string): Promise<void> {
  const history = await handle.fetchHistory();
  writeHistory(file, history);
  console.log(`${basename(file)}: ${history.events?.length ?? 0} events`);
}

/** Runs `workers` until `record` is done (or fails), then shuts them down. */
export async function recordOn(workers: { run(): Promise<void>; shutdown(): void }[], record: () => Promise<void>) {
  await Promise.all([...workers.map((w) => w.run()), record().finally(() => workers.forEach((w) => w.shutdown()))]);
}

export function writeHistory(file: string, history: History): void {
  writeFileSync(
    file,
    JSON.stringify(HistoryMessage.toObject(HistoryMessage.fromObject(history), AS_JSON), null, 1) + '\n',
  );
}

export function readHistory(file: string): History {
  return HistoryMessage.fromObject(JSON.parse(readFileSync(file, 'utf8')));
}

/** A history file as `Worker.runReplayHistories` takes it, with the workflow id it ran under (`workflowIdOf`). */
export function historyAndWorkflowId(file: string): HistoryAndWorkflowId {
  const history = readHistory(file);
  return { workflowId: workflowIdOf(history, basename(file, '.json')), history };
}

/**
 * `file`'s history with a signal inserted before event `beforeEventId` (a workflow task's scheduling, so the signal is
 * delivered in that task), every later event and every reference to one (`…EventId`) moved up by one: a history as if
 * someone had sent that signal then, for runs recorded before the workflow handled it.
 */
export function withSignal(file: string, beforeEventId: number, signalName: string, input: unknown): History {
  const json = JSON.parse(readFileSync(file, 'utf8')) as { events: Record<string, unknown>[] };
  const at = json.events.findIndex((e) => Number(e.eventId) === beforeEventId);
  if (at < 0 || json.events[at]!.eventType !== 'EVENT_TYPE_WORKFLOW_TASK_SCHEDULED')
    throw new Error(`${file}: event ${beforeEventId} is not a workflow task's scheduling`);
  const shift = (value: unknown, key = ''): unknown => {
    if (Array.isArray(value)) return value.map((v) => shift(v));
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shift(v, k)]));
    if (/EventId$|^eventId$/.test(key) && Number(value) >= beforeEventId) return String(Number(value) + 1);
    return value;
  };
  const events = json.events.map((e) => shift(e) as Record<string, unknown>);
  const base64 = (text: string) => Buffer.from(text).toString('base64');
  events.splice(at, 0, {
    eventId: String(beforeEventId),
    eventTime: json.events[at]!.eventTime,
    eventType: 'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
    workflowExecutionSignaledEventAttributes: {
      signalName,
      input: { payloads: [{ metadata: { encoding: base64('json/plain') }, data: base64(JSON.stringify(input)) }] },
      identity: 'test',
    },
  });
  return HistoryMessage.fromObject({ ...json, events });
}
