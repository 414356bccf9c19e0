// What -o wide adds to list and status, and the rows and lines of their -w watches.
import { describe, expect, it } from 'vitest';
import {
  alignedRow,
  changeLine,
  columnWidths,
  formatList,
  formatStatus,
  listHeader,
  listRow,
} from '../../client/cli/format.js';
import { StatusPrinter } from '../../client/cli/status-printer.js';
import type { ModelSummary } from '../../client/list-models.js';
import type { ModelStatus } from '../../workflows/contract/index.js';

const now = new Date('2026-01-01T12:10:00Z');

function status(patch: Partial<ModelStatus> = {}): ModelStatus {
  return {
    name: 'qwen',
    namespace: 'models',
    cluster: 'default',
    phase: 'Ready',
    conditions: [],
    endpoint: 'http://qwen.models.svc:8000',
    servedModelName: 'qwen-chat',
    source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
    replicas: 2,
    readyReplicas: 2,
    generation: 2,
    observedGeneration: 2,
    timeline: [],
    startedAt: '2026-01-01T12:00:00Z',
    updatedAt: '2026-01-01T12:09:30Z',
    ...patch,
  };
}

const summary = (patch: Partial<ModelSummary>): ModelSummary => ({
  name: 'qwen',
  namespace: 'models',
  cluster: 'default',
  phase: 'Ready',
  workflowId: 'servedmodel/default/models/qwen',
  runId: 'r1',
  execution: 'RUNNING',
  startedAt: new Date('2026-01-01T12:00:00Z'),
  ...patch,
});

describe('list -o wide', () => {
  const models = () => [
    summary({ status: status() }),
    summary({
      name: 'llama',
      phase: 'Starting',
      status: status({
        name: 'llama',
        phase: 'Starting',
        endpoint: undefined,
        servedModelName: 'llama',
        source: 'pvc:weights/llama',
        readyReplicas: 0,
        replicas: 1,
        observedGeneration: 1,
        generation: 1,
        waiting: { reason: 'Unschedulable', message: 'no GPU node', since: '2026-01-01T12:08:00Z' },
      }),
    }),
    summary({ name: 'quiet', phase: 'Downloading', startedAt: new Date('2026-01-01T09:55:00Z') }),
    summary({ name: 'old', phase: 'Deleted', execution: 'COMPLETED', startedAt: new Date('2025-12-29T08:00:00Z') }),
  ];

  it('adds MODEL, SOURCE and REASON after AGE, as kubectl adds its wide columns', () => {
    expect(formatList(models(), now, 'models', { wide: true })).toBe(
      [
        'NAME   CLUSTER  PHASE        READY  GEN  ENDPOINT                     AGE   MODEL      SOURCE                                       REASON',
        'qwen   default  Ready        2/2    2/2  http://qwen.models.svc:8000  10m   qwen-chat  huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
        'llama  default  Starting     0/1    1/1                               10m   llama      pvc:weights/llama                            Unschedulable',
        'quiet  default  Downloading  ?      ?                                 135m  ?          ?',
        'old    default  Deleted      -      -                                 3d4h  -          -',
      ].join('\n'),
    );
  });

  it('says the error being retried or failed with as REASON when nothing is waited for', () => {
    const failed = summary({
      phase: 'Failed',
      status: status({ phase: 'Failed', lastError: { reason: 'CrashLoopBackOff', message: 'exit 1', at: 't' } }),
    });
    expect(listRow(failed, now, { everyNamespace: false, wide: true }).at(-1)).toBe('CrashLoopBackOff');
  });

  it('keeps the NAMESPACE column first with -A, and the narrow table without wide', () => {
    expect(listHeader({ everyNamespace: true, wide: true })).toEqual([
      'NAMESPACE',
      'NAME',
      'CLUSTER',
      'PHASE',
      'READY',
      'GEN',
      'ENDPOINT',
      'AGE',
      'MODEL',
      'SOURCE',
      'REASON',
    ]);
    expect(formatList(models(), now, 'models').split('\n')[0]).toBe(
      'NAME   CLUSTER  PHASE        READY  GEN  ENDPOINT                     AGE',
    );
  });
});

describe('a watched list', () => {
  it('pads a later row to the widths of the first listing, a wider cell widening only its own line', () => {
    const columns = { everyNamespace: false, wide: false };
    const header = listHeader(columns);
    const widths = columnWidths([header, listRow(summary({ status: status() }), now, columns)]);
    expect(alignedRow(header, widths)).toBe('NAME  CLUSTER  PHASE  READY  GEN  ENDPOINT                     AGE');
    const updating = summary({
      phase: 'Updating',
      status: status({ phase: 'Updating', observedGeneration: 1, generation: 2 }),
    });
    expect(alignedRow(listRow(updating, now, columns), widths)).toBe(
      'qwen  default  Updating  2/2    1/2  http://qwen.models.svc:8000  10m',
    );
  });
});

describe('status -o wide', () => {
  it('adds who asked for the generation, when the status changed last, and the workflow ID', () => {
    const lines = formatStatus(status({ requestedBy: 'ci@pipeline' }), now, undefined, { wide: true }).split('\n');
    const age = lines.findIndex((l) => l.startsWith('  age:'));
    expect(lines.slice(age, age + 4)).toEqual([
      '  age:         10m',
      '  asked by:    ci@pipeline',
      '  updated:     30s ago',
      '  workflow:    servedmodel/default/models/qwen',
    ]);
    expect(formatStatus(status(), now)).not.toMatch(/updated:|workflow:/);
  });
});

describe('status -w lines', () => {
  it('carry ready replicas, and a change of them alone is a line', () => {
    const starting = status({ phase: 'Starting', readyReplicas: 0, endpoint: undefined });
    const one = status({ phase: 'Starting', readyReplicas: 1, endpoint: undefined });
    expect(changeLine(undefined, starting, { replicas: true })).toBe('Starting     generation 2  ready 0/2');
    expect(changeLine(starting, one, { replicas: true })).toBe('Starting     generation 2  ready 1/2');
    expect(changeLine(one, status(), { replicas: true })).toBe(
      'Ready        generation 2  ready 2/2  http://qwen.models.svc:8000',
    );
    // ferry watch's lines are unchanged: replicas are not its business.
    expect(changeLine(starting, one)).toBeUndefined();
  });

  it('print nothing for the status already shown, then what changed', () => {
    let out = '';
    const printer = new StatusPrinter({ write: (t: string) => (out += t) }, () => new Date(2026, 0, 1, 12, 0, 5), {
      replicas: true,
    });
    printer.shown(status());
    printer.update(status());
    expect(out).toBe('');
    printer.update(status({ readyReplicas: 1 }));
    expect(out).toBe('12:00:05  Ready        generation 2  ready 1/2  http://qwen.models.svc:8000\n');
  });
});
