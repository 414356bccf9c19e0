// Workflow histories as JSON files for replay tests.
//
// Not `historyToJSON`/`historyFromJSON` from @temporalio/common: with this lock file, @temporalio/common and
// @temporalio/proto each get their own copy of protobufjs 8, and the proto3-JSON helpers of one reject the other's
// types ("type must be a Type"). protobufjs' own object form of the History message is lossless and needs one copy.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { HistoryAndWorkflowId } from '@temporalio/client';
import proto from '@temporalio/proto';

type History = proto.temporal.api.history.v1.IHistory;
const HistoryMessage = proto.temporal.api.history.v1.History;
const AS_JSON = { longs: String, enums: String, bytes: String } as const;

export function writeHistory(file: string, history: History): void {
  writeFileSync(
    file,
    JSON.stringify(HistoryMessage.toObject(HistoryMessage.fromObject(history), AS_JSON), null, 1) + '\n',
  );
}

export function readHistory(file: string): History {
  return HistoryMessage.fromObject(JSON.parse(readFileSync(file, 'utf8')));
}

/** A history file as `Worker.runReplayHistories` takes it, named by its file. */
export function historyAndWorkflowId(file: string): HistoryAndWorkflowId {
  return { workflowId: basename(file, '.json'), history: readHistory(file) };
}
