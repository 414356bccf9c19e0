// What a model's status changes tell the worker (workflows/status/events.ts), and what the worker makes of them
// (worker/model-events.ts): the log lines, the Kubernetes Events and the metric labels.
import { describe, expect, it } from 'vitest';
import type { LogLevel, LogMetadata, Logger } from '@temporalio/worker';
import type { EventRecorder, ModelEventNote } from '../../activities/cluster/events.js';
import { eventName } from '../../activities/cluster/events.js';
import { parseServedModel, type ModelEvent, type ModelStatus } from '../../workflows/contract/index.js';
import { statusEvents } from '../../workflows/status/events.js';
import {
  acceptSpec,
  beginStep,
  beginTeardown,
  failStep,
  finishStep,
  finishTeardown,
  foldProgress,
  initialStatus,
  markReady,
  observe,
  refuseChange,
  retryingStep,
} from '../../workflows/status/transitions.js';
import { reasonLabel } from '../../worker/metrics.js';
import { kubernetesEvent, reportModelEvents } from '../../worker/model-events.js';

const spec = parseServedModel({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen', namespace: 'models' },
  spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } } },
});
const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, s)).toISOString();

/** Applies each change in turn and collects the events of every step. */
function run(start: ModelStatus, ...changes: ((s: ModelStatus) => ModelStatus)[]): ModelEvent[][] {
  const out: ModelEvent[][] = [];
  let status = start;
  for (const change of changes) {
    const next = change(status);
    out.push(statusEvents(status, next));
    status = next;
  }
  return out;
}

describe('statusEvents', () => {
  it('reports a step starting and ending with its duration, a download with its bytes, and Ready with the time it took', () => {
    const events = run(
      initialStatus(spec, at(0)),
      (s) => beginStep(s, 'claim', 1, at(1)),
      (s) => finishStep(s, 'claim', 1, at(2)),
      (s) => beginStep(s, 'download', 1, at(3)),
      (s) => foldProgress(s, { step: 'download', state: 'Running', bytes: 4096 }, 'download', at(4)),
      (s) => finishStep(s, 'download', 1, at(13), 'qwen-pull-1 in 10s'),
      (s) => markReady(s, { generation: 1, endpoint: 'http://qwen.models:8000', readyReplicas: 1 }, at(20)),
    );
    expect(events[0]).toEqual([{ kind: 'stepStarted', step: 'claim', generation: 1 }]);
    expect(events[1]).toEqual([
      { kind: 'stepEnded', step: 'claim', generation: 1, outcome: 'Succeeded', durationMs: 1000 },
    ]);
    expect(events[3]).toEqual([]);
    expect(events[4]).toEqual([
      {
        kind: 'stepEnded',
        step: 'download',
        generation: 1,
        outcome: 'Succeeded',
        durationMs: 10_000,
        detail: 'qwen-pull-1 in 10s',
        bytes: 4096,
      },
    ]);
    const ready = events[5]!.find((e) => e.kind === 'phaseChanged');
    // From the generation's first step (claim at 1 s) to Ready at 20 s.
    expect(ready).toMatchObject({ to: 'Ready', reason: 'Ready', readyAfterMs: 19_000 });
    expect(ready).toHaveProperty('message', expect.stringContaining('http://qwen.models:8000'));
  });

  it('reports each failed attempt once, whether it is retried, and a Failed phase with the reason', () => {
    const failure = { reason: 'KubernetesUnreachable', message: 'connect ECONNREFUSED' };
    const events = run(
      beginStep(initialStatus(spec, at(0)), 'claim', 1, at(1)),
      (s) => retryingStep(s, 'claim', failure, 1, 1, at(2)),
      (s) => ({ ...s }),
      (s) => retryingStep(s, 'claim', failure, 2, 1, at(5)),
      (s) => failStep(s, 'claim', { reason: 'NameConflict', message: 'ConfigMap/qwen-ferry is not ours' }, 1, at(9)),
    );
    expect(events[0]).toEqual([{ kind: 'stepFailed', step: 'claim', generation: 1, ...failure, retrying: true }]);
    expect(events[1]).toEqual([]);
    expect(events[2]).toHaveLength(1);
    expect(events[3]).toContainEqual(
      expect.objectContaining({ kind: 'stepFailed', reason: 'NameConflict', retrying: false }),
    );
    expect(events[3]).toContainEqual(
      expect.objectContaining({ kind: 'phaseChanged', to: 'Failed', reason: 'NameConflict' }),
    );
  });

  it('reports Degraded with the problem, recovery without a time to Ready, updates and teardown', () => {
    const ready = markReady(initialStatus(spec, at(0)), { generation: 1, readyReplicas: 1 }, at(1));
    const problem = { reason: 'CrashLoopBackOff', message: 'engine restarted 3 times' };
    const events = run(
      ready,
      (s) => observe(s, { replicas: 1, readyReplicas: 0, problem }, at(2)),
      (s) => observe(s, { replicas: 1, readyReplicas: 1 }, at(3)),
      (s) => acceptSpec(s, spec, 2, at(4)),
      (s) => beginTeardown(s, 'done', at(5)),
      (s) => finishTeardown(s, { deleted: ['Deployment/qwen'], retained: [] }, 1, at(6)),
    );
    expect(events[0]).toContainEqual(
      expect.objectContaining({ kind: 'phaseChanged', to: 'Degraded', reason: 'CrashLoopBackOff' }),
    );
    const recovered = events[1]!.find((e) => e.kind === 'phaseChanged');
    expect(recovered).toMatchObject({ from: 'Degraded', to: 'Ready' });
    expect(recovered).not.toHaveProperty('readyAfterMs');
    expect(events[2]).toContainEqual({ kind: 'specAccepted', generation: 2 });
    expect(events[3]).toContainEqual(
      expect.objectContaining({ kind: 'stepStarted', step: 'teardown', detail: 'done' }),
    );
    expect(events[4]).toContainEqual(
      expect.objectContaining({
        kind: 'stepEnded',
        step: 'teardown',
        outcome: 'Succeeded',
        detail: 'deleted 1 object(s) (done)',
      }),
    );
  });
});

describe('a refused signalled update', () => {
  it('is one changeRefused event, a warning line, a ChangeRefused Event, and a metric; the status keeps its generation', () => {
    const ready = markReady(initialStatus(spec, at(0)), { generation: 1, readyReplicas: 1 }, at(1));
    const failure = { reason: 'InvalidSpec', message: 'spec.replicas: must be a whole number from 0, got -1' };
    const [first, second] = run(
      ready,
      (s) => refuseChange(s, failure, at(2)),
      (s) => refuseChange(s, { ...failure, message: 'spec.replicas: must be a whole number from 0, got -2' }, at(2)),
    );
    const refused = { kind: 'changeRefused', change: 'update', generation: 1, ...failure };
    expect(first).toEqual([refused]);
    expect(second).toEqual([{ ...refused, message: 'spec.replicas: must be a whole number from 0, got -2' }]);
    const status = refuseChange(ready, failure, at(2));
    expect(status).toMatchObject({ phase: 'Ready', generation: 1, lastError: { ...failure, refused: 'update' } });
    expect(status.timeline.at(-1)).toMatchObject({
      step: 'update',
      outcome: 'Failed',
      detail: `update by signal refused: InvalidSpec: ${failure.message}`,
    });
    expect(kubernetesEvent(refused as ModelEvent)).toEqual([
      {
        type: 'Warning',
        reason: 'ChangeRefused',
        message: `update by signal refused, generation 1 stays: InvalidSpec: ${failure.message}`,
      },
    ]);
  });
});

describe('the worker side of model events', () => {
  function capture(): { logger: Logger; lines: { level: LogLevel; message: string; meta: LogMetadata }[] } {
    const lines: { level: LogLevel; message: string; meta: LogMetadata }[] = [];
    const at =
      (level: LogLevel) =>
      (message: string, meta: LogMetadata = {}) =>
        void lines.push({ level, message, meta });
    return {
      lines,
      logger: {
        log: (level, message, meta) => at(level)(message, meta),
        trace: at('TRACE'),
        debug: at('DEBUG'),
        info: at('INFO'),
        warn: at('WARN'),
        error: at('ERROR'),
      },
    };
  }
  const subject = { cluster: 'gpu', namespace: 'models', name: 'qwen', rootUid: 'uid-1' };

  it('logs one line per event with the model, its workflow, the step, the generation, the duration and the reason', () => {
    const { logger, lines } = capture();
    const posted: ModelEventNote[] = [];
    const recorder = { record: async (_s: unknown, note: ModelEventNote) => void posted.push(note) };
    reportModelEvents(
      { logger, events: recorder as unknown as EventRecorder },
      { workflowId: 'servedmodel/gpu/models/qwen' },
      subject,
      [
        { kind: 'stepEnded', step: 'download', generation: 2, outcome: 'Succeeded', durationMs: 1500, bytes: 10 },
        { kind: 'stepFailed', step: 'rollout', generation: 2, reason: 'Forbidden', message: 'no', retrying: true },
      ],
    );
    expect(lines).toEqual([
      {
        level: 'INFO',
        message: 'download succeeded',
        meta: {
          model: 'qwen',
          namespace: 'models',
          cluster: 'gpu',
          workflowId: 'servedmodel/gpu/models/qwen',
          step: 'download',
          generation: 2,
          outcome: 'Succeeded',
          durationMs: 1500,
          bytes: 10,
        },
      },
      {
        level: 'WARN',
        message: 'rollout failed, retrying',
        meta: expect.objectContaining({
          step: 'rollout',
          reason: 'Forbidden',
          workflowId: 'servedmodel/gpu/models/qwen',
        }),
      },
    ]);
    expect(posted).toEqual([
      { type: 'Warning', reason: 'Retrying', message: 'rollout (generation 2) failed, retrying: Forbidden: no' },
    ]);
  });

  it('posts no Kubernetes Event before the model has a root object', () => {
    const posted: ModelEventNote[] = [];
    const recorder = { record: async (_s: unknown, note: ModelEventNote) => void posted.push(note) };
    const { rootUid: _uid, ...unclaimed } = subject;
    reportModelEvents(
      { logger: capture().logger, events: recorder as unknown as EventRecorder },
      { workflowId: 'w' },
      unclaimed,
      [{ kind: 'phaseChanged', from: 'Pending', to: 'Failed', generation: 1, reason: 'NameConflict', message: 'x' }],
    );
    expect(posted).toEqual([]);
  });

  it('turns Ready, Degraded, Failed, an update, a repair and the teardown into Events, and steps into none', () => {
    const phase = (to: 'Ready' | 'Degraded' | 'Failed' | 'Starting', reason: string, message: string) =>
      kubernetesEvent({ kind: 'phaseChanged', from: 'Pending', to, generation: 1, reason, message });
    expect(phase('Ready', 'Ready', 'serving qwen')).toEqual([
      { type: 'Normal', reason: 'Ready', message: 'serving qwen' },
    ]);
    expect(phase('Degraded', 'CrashLoopBackOff', 'restarted')).toEqual([
      { type: 'Warning', reason: 'Degraded', message: 'CrashLoopBackOff: restarted' },
    ]);
    expect(phase('Failed', 'NameConflict', 'not ours')).toEqual([
      { type: 'Warning', reason: 'Failed', message: 'NameConflict: not ours' },
    ]);
    expect(phase('Starting', 'Starting', 'x')).toEqual([]);
    expect(kubernetesEvent({ kind: 'specAccepted', generation: 1 })).toEqual([]);
    expect(kubernetesEvent({ kind: 'specAccepted', generation: 3 })).toEqual([
      { type: 'Normal', reason: 'UpdateAccepted', message: 'generation 3 accepted' },
    ]);
    expect(kubernetesEvent({ kind: 'specAccepted', generation: 3, by: 'tenant team-a through Nexus' })).toEqual([
      {
        type: 'Normal',
        reason: 'UpdateAccepted',
        message: 'generation 3 accepted, asked by tenant team-a through Nexus',
      },
    ]);
    expect(
      kubernetesEvent({
        kind: 'stepEnded',
        step: 'repair',
        generation: 1,
        outcome: 'Succeeded',
        durationMs: 0,
        detail: 'Service/qwen re-created',
      }),
    ).toEqual([{ type: 'Normal', reason: 'Repaired', message: 'Service/qwen re-created' }]);
    expect(kubernetesEvent({ kind: 'stepStarted', step: 'download', generation: 1 })).toEqual([]);
    expect(
      kubernetesEvent({
        kind: 'stepFailed',
        step: 'claim',
        generation: 1,
        reason: 'NameConflict',
        message: 'x',
        retrying: false,
      }),
    ).toEqual([]);
  });

  it('names an Event by its object, type, reason and message, so a repeat counts the same Event', () => {
    const note: ModelEventNote = { type: 'Normal', reason: 'Ready', message: 'serving qwen' };
    const target = { namespace: 'models', name: 'qwen', rootUid: 'uid-1' };
    expect(eventName(target, note)).toMatch(/^qwen-ferry\.[0-9a-f]{16}$/);
    expect(eventName(target, note)).toBe(eventName(target, { ...note }));
    expect(eventName(target, note)).not.toBe(eventName(target, { ...note, message: 'serving qwen at x' }));
    expect(eventName(target, note)).not.toBe(eventName({ ...target, rootUid: 'uid-2' }, note));
  });

  it('keeps metric labels bounded: catalogue types and reason words pass, error text does not', () => {
    expect(reasonLabel('NameConflict')).toBe('NameConflict');
    expect(reasonLabel('CrashLoopBackOff')).toBe('CrashLoopBackOff');
    expect(reasonLabel('connect ECONNREFUSED 10.0.0.1:443')).toBe('Other');
    expect(reasonLabel('pod qwen-7d9f-abcde failed')).toBe('Other');
    expect(reasonLabel(undefined)).toBe('Other');
  });
});
