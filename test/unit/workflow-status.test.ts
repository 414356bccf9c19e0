import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import {
  type AdapterSyncResult,
  formatBytes,
  formatDownload,
  formatDuration,
  modelRefOf,
  type ModelStatus,
  parseServedModel,
  newRevision,
  sameJson,
  withRevisionOf,
  searchAttributesFor,
  specChanges,
  type StepProgress,
  taskQueueFor,
  waitOutcome,
  workflowIdFor,
} from '../../workflows/contract/index.js';
import { adapterProblem, adapterStatuses, adaptersForgotten } from '../../workflows/status/adapters.js';
import { setCondition } from '../../workflows/status/conditions.js';
import { classifyFailure } from '../../workflows/status/failure.js';
import { summarizeStatus } from '../../workflows/status/summary.js';
import { sampleBaseline } from '../support/baseline.js';
import { currentStep, trimTimeline } from '../../workflows/status/timeline.js';
import {
  acceptSpec,
  beginStep,
  beginTeardown,
  beginUpdate,
  failStep,
  finishStep,
  finishTeardown,
  foldProgress,
  initialStatus,
  markReady,
  observe,
  phaseForStep,
  retryingStep,
  skipDownload,
  supersede,
} from '../../workflows/status/transitions.js';

const spec = parseServedModel({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen', namespace: 'models' },
  spec: { cluster: 'gpu-a', source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } } },
});

/** ISO time `s` seconds after a fixed start. */
const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 12, 0, 0) + s * 1000).toISOString();

/** A model taken through every step of generation 1, one second each. */
function readyModel(): ModelStatus {
  let status = initialStatus(spec, t(0));
  let clock = 0;
  for (const step of ['claim', 'storage', 'download', 'release', 'rollout', 'startup'] as const) {
    status = beginStep(status, step, 1, t(clock));
    status = finishStep(status, step, 1, t(++clock));
  }
  return markReady(status, { generation: 1, endpoint: 'http://qwen.models.svc:8000/v1', readyReplicas: 1 }, t(clock));
}

describe('initial status and spec', () => {
  it('starts Pending at generation 1 with what the spec names', () => {
    expect(initialStatus(spec, t(0))).toEqual({
      name: 'qwen',
      namespace: 'models',
      cluster: 'gpu-a',
      phase: 'Pending',
      conditions: [],
      servedModelName: 'qwen',
      source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
      replicas: 1,
      readyReplicas: 0,
      generation: 1,
      observedGeneration: 0,
      timeline: [],
      startedAt: t(0),
      updatedAt: t(0),
    });
  });

  it('records an accepted spec as a new generation', () => {
    const next = parseServedModel({
      ...spec,
      spec: { ...spec.spec, replicas: 3, engine: { ...spec.spec.engine, servedModelName: 'q' } },
    });
    expect(acceptSpec(readyModel(), next, 2, t(9))).toMatchObject({
      generation: 2,
      observedGeneration: 1,
      replicas: 3,
      servedModelName: 'q',
    });
  });
});

describe('steps', () => {
  it('maps steps to phases; engine steps of a model that served before are an update', () => {
    const fresh = initialStatus(spec, t(0));
    expect(
      ['claim', 'storage', 'download', 'release', 'rollout', 'startup'].map((s) => phaseForStep(s as never, fresh)),
    ).toEqual(['Pending', 'Provisioning', 'Downloading', 'Releasing', 'Starting', 'Starting']);
    expect(phaseForStep('rollout', readyModel())).toBe('Updating');
    expect(phaseForStep('stop', readyModel())).toBe('Updating');
    expect(phaseForStep('teardown', readyModel())).toBe('Deleting');
  });

  it('records each step with start, end, duration and outcome, and its condition', () => {
    let status = beginStep(initialStatus(spec, t(0)), 'download', 1, t(10));
    expect(status.phase).toBe('Downloading');
    expect(currentStep(status)).toBe('download');
    expect(status.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['WeightsReady', 'Unknown', 'InProgress'],
      ['Ready', 'False', 'Downloading'],
    ]);
    status = finishStep(status, 'download', 1, t(70), 'qwen-pull-1234abcd in 60s');
    expect(status.timeline).toEqual([
      {
        step: 'download',
        generation: 1,
        startedAt: t(10),
        endedAt: t(70),
        durationMs: 60_000,
        outcome: 'Succeeded',
        detail: 'qwen-pull-1234abcd in 60s',
      },
    ]);
    expect(status.conditions[0]).toMatchObject({
      type: 'WeightsReady',
      status: 'True',
      reason: 'Downloaded',
      lastTransitionTime: t(70),
    });
    expect(currentStep(status)).toBeUndefined();
  });

  it('is Ready with every condition True after the whole sequence', () => {
    const status = readyModel();
    expect(status.phase).toBe('Ready');
    expect(status.observedGeneration).toBe(1);
    expect(status.conditions.every((c) => c.status === 'True')).toBe(true);
    expect(status.timeline.map((e) => e.durationMs)).toEqual([1000, 1000, 1000, 1000, 1000, 1000]);
  });

  it('records a skipped download as such, with WeightsReady True', () => {
    const status = skipDownload(
      initialStatus(spec, t(0)),
      1,
      t(5),
      'the volume already holds huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
    );
    expect(status.timeline[0]).toMatchObject({ step: 'download', outcome: 'Skipped', durationMs: 0 });
    expect(status.conditions[0]).toMatchObject({ type: 'WeightsReady', status: 'True', reason: 'AlreadyOnVolume' });
  });

  it('shows a transient failure while retrying, and clears it when the step succeeds', () => {
    let status = beginStep(initialStatus(spec, t(0)), 'storage', 1, t(1));
    status = retryingStep(status, 'storage', { reason: 'ApiUnavailable', message: 'ECONNREFUSED' }, 1, 1, t(2));
    expect(status.phase).toBe('Provisioning');
    expect(status.lastError).toEqual({
      reason: 'ApiUnavailable',
      message: 'ECONNREFUSED',
      at: t(2),
      step: 'storage',
      generation: 1,
    });
    expect(status.conditions[0]).toMatchObject({ type: 'StorageReady', status: 'False', reason: 'ApiUnavailable' });
    status = finishStep(status, 'storage', 1, t(3));
    expect(status.lastError).toBeUndefined();
    expect(status.conditions[0]).toMatchObject({ status: 'True' });
  });

  it('records who asked for each generation, as the caller said, and for the teardown (audit)', () => {
    const started = initialStatus(spec, t(0), { tenant: 'team-a', requestedBy: 'tenant team-a through Nexus' });
    expect(started).toMatchObject({ tenant: 'team-a', requestedBy: 'tenant team-a through Nexus', generation: 1 });
    const updated = acceptSpec(readyModel(), spec, 2, t(30), '4242@laptop');
    expect(updated.requestedBy).toBe('4242@laptop');
    // A later change that does not say who asked does not keep the earlier requester.
    expect(acceptSpec(updated, spec, 3, t(40))).not.toHaveProperty('requestedBy');
    // The caller's words are kept printable and short.
    const odd = acceptSpec(readyModel(), spec, 2, t(30), `\u001b[31mred\u001b[0m${'x'.repeat(500)}`).requestedBy!;
    expect(odd.startsWith('\\u001b[31mred')).toBe(true);
    expect(Buffer.byteLength(odd)).toBeLessThanOrEqual(200);
    expect(acceptSpec(readyModel(), spec, 2, t(30), '   ')).not.toHaveProperty('requestedBy');

    const teardown = (reason?: string, by?: string) =>
      beginTeardown(readyModel(), reason, t(50), by).timeline.at(-1)!.detail;
    expect(teardown('done', '4242@laptop')).toBe('done, asked by 4242@laptop');
    expect(teardown(undefined, '4242@laptop')).toBe('asked by 4242@laptop');
    expect(teardown('done')).toBe('done');
  });

  it('fails with reason, message and step; an update in progress fails with it', () => {
    let status = beginUpdate(readyModel(), 2, t(20), 'generation 2: in place');
    status = beginStep(status, 'startup', 2, t(21));
    status = failStep(status, 'startup', { reason: 'CrashLoopBackOff', message: 'exit code 1' }, 2, t(30));
    expect(status.phase).toBe('Failed');
    expect(status.lastError).toEqual({
      reason: 'CrashLoopBackOff',
      message: 'exit code 1',
      at: t(30),
      step: 'startup',
      generation: 2,
    });
    expect(status.timeline.slice(-2).map((e) => [e.step, e.outcome])).toEqual([
      ['update', 'Failed'],
      ['startup', 'Failed'],
    ]);
    expect(status.conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'CrashLoopBackOff',
    });
    expect(status.observedGeneration).toBe(1);
  });

  it('cancels open steps when superseded', () => {
    let status = beginUpdate(readyModel(), 2, t(20), 'generation 2');
    status = beginStep(status, 'rollout', 2, t(21));
    status = supersede(status, t(25), 'superseded by generation 3');
    expect(status.timeline.slice(-2)).toMatchObject([
      { step: 'update', outcome: 'Cancelled', durationMs: 5_000, detail: 'superseded by generation 3' },
      { step: 'rollout', outcome: 'Cancelled', durationMs: 4_000 },
    ]);
  });
});

describe('conditions', () => {
  it('moves lastTransitionTime only when the status changes', () => {
    const base = initialStatus(spec, t(0));
    const change = {
      type: 'Ready' as const,
      status: 'False' as const,
      reason: 'Downloading',
      message: 'a',
      observedGeneration: 1,
    };
    const first = setCondition(base, change, t(1));
    const second = setCondition(first, { ...change, reason: 'Starting' }, t(2));
    expect(second.conditions[0]).toMatchObject({ reason: 'Starting', lastTransitionTime: t(1) });
    const third = setCondition(second, { ...change, status: 'True', reason: 'Ready' }, t(3));
    expect(third.conditions[0]!.lastTransitionTime).toBe(t(3));
    expect(setCondition(third, { ...change, status: 'True', reason: 'Ready' }, t(4))).toBe(third);
  });
});

describe('progress', () => {
  it('folds download progress and keeps what a report leaves out', () => {
    let status = beginStep(initialStatus(spec, t(0)), 'download', 1, t(1));
    status = foldProgress(
      status,
      { step: 'download', state: 'Running', bytes: 100, totalBytes: 1000 },
      currentStep(status),
      t(2),
    );
    status = foldProgress(status, { step: 'download', state: 'Running', bytes: 400 }, currentStep(status), t(3));
    expect(status.download).toEqual({ bytes: 400, totalBytes: 1000, state: 'Running', updatedAt: t(3) });
    expect(status.waiting).toBeUndefined();
  });

  it('shows the rate the puller measured and the time left at it, and drops both when a report has no rate', () => {
    let status = beginStep(initialStatus(spec, t(0)), 'download', 1, t(1));
    const report = (bytes: number, bytesPerSecond?: number): StepProgress => ({
      step: 'download',
      state: 'Running',
      bytes,
      totalBytes: 1000,
      ...(bytesPerSecond !== undefined ? { bytesPerSecond } : {}),
    });
    status = foldProgress(status, report(400, 50), currentStep(status), t(2));
    expect(status.download).toMatchObject({ bytes: 400, bytesPerSecond: 50, etaSeconds: 12 });
    status = foldProgress(status, report(400, 0), currentStep(status), t(3));
    expect(status.download).toMatchObject({ bytesPerSecond: 0 });
    expect(status.download?.etaSeconds).toBeUndefined();
    status = foldProgress(status, report(500), currentStep(status), t(4));
    expect(status.download).toEqual({ bytes: 500, totalBytes: 1000, state: 'Running', updatedAt: t(4) });
    expect(
      formatDownload({ bytes: 512 * 1024, totalBytes: 1024 * 1024, bytesPerSecond: 20 * 1024, etaSeconds: 16 }),
    ).toBe('512.0 KiB of 1.0 MiB (50%), 20.0 KiB/s, 16.0s left');
    expect(formatDownload({ bytes: 10, bytesPerSecond: 0 })).toBe('10 B, stalled');
  });

  it('shows a waiting reason with the time it started, and clears it when things move', () => {
    let status = beginStep(readyModel(), 'rollout', 2, t(10));
    const unschedulable = { step: 'rollout' as const, state: 'Unschedulable', message: '0/2 nodes available' };
    status = foldProgress(status, unschedulable, currentStep(status), t(11));
    status = foldProgress(status, { ...unschedulable, message: '0/3 nodes available' }, currentStep(status), t(12));
    expect(status.waiting).toEqual({ reason: 'Unschedulable', message: '0/3 nodes available', since: t(11) });
    expect(status.lastError).toBeUndefined();
    status = foldProgress(status, { step: 'rollout', state: 'Running', readyReplicas: 1 }, currentStep(status), t(13));
    expect(status.waiting).toBeUndefined();
    expect(status.readyReplicas).toBe(1);
  });

  it('shows a Kubernetes request being retried in every step that makes requests: storage, stop and teardown too', () => {
    const retrying = (step: StepProgress['step']) => ({ step, state: 'KubernetesHttp503', message: 'retry 1' });
    for (const step of ['storage', 'stop', 'teardown'] as const) {
      const running = beginStep(readyModel(), step, 2, t(20));
      expect(foldProgress(running, retrying(step), currentStep(running), t(21)).waiting, step).toEqual({
        reason: 'KubernetesHttp503',
        message: 'retry 1',
        since: t(21),
      });
    }
    const storage = beginStep(initialStatus(spec, t(0)), 'storage', 1, t(1));
    expect(foldProgress(storage, retrying('download'), currentStep(storage), t(2))).toBe(storage);
  });

  it('ignores a late report from a step that is over', () => {
    const status = readyModel();
    expect(foldProgress(status, { step: 'download', state: 'Running', bytes: 5 }, currentStep(status), t(50))).toBe(
      status,
    );
    const rolling = beginStep(status, 'rollout', 2, t(51));
    expect(foldProgress(rolling, { step: 'download', state: 'Running', bytes: 5 }, currentStep(rolling), t(52))).toBe(
      rolling,
    );
  });
});

describe('watching', () => {
  it('degrades on a problem, stays put on the same one, and recovers by itself', () => {
    const ready = readyModel();
    const problem = { reason: 'CrashLoopBackOff', message: 'restarted 3 times' };
    const degraded = observe(ready, { replicas: 1, readyReplicas: 0, problem }, t(100));
    expect(degraded.phase).toBe('Degraded');
    expect(degraded.lastError).toMatchObject({ ...problem, generation: 1 });
    expect(degraded.conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'CrashLoopBackOff',
    });
    expect(observe(degraded, { replicas: 1, readyReplicas: 0, problem }, t(101))).toBe(degraded);

    const recovered = observe(degraded, { replicas: 1, readyReplicas: 1 }, t(160));
    expect(recovered.phase).toBe('Ready');
    expect(recovered.lastError).toBeUndefined();
    expect(recovered.timeline.at(-1)).toMatchObject({ step: 'degraded', outcome: 'Succeeded', durationMs: 60_000 });
  });

  it('changes nothing on a healthy look at a Ready model', () => {
    const ready = readyModel();
    expect(observe(ready, { replicas: 1, readyReplicas: 1 }, t(100))).toBe(ready);
  });
  it('at zero under scaling is Idle, not Degraded: a look keeps it, a problem degrades it and its end makes it Idle again; a wake starts it, an update updates it; a wait for Ready is met', () => {
    const scaled = { ...readyModel(), scaling: { replicas: 0, minReplicas: 1, maxReplicas: 2, decisions: 1 } };
    const idle = markReady({ ...scaled, replicas: 0 }, { generation: 1, readyReplicas: 0 }, t(100));
    expect(idle.phase).toBe('Idle');
    expect(idle.conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Idle' });
    expect(observe(idle, { replicas: 0, readyReplicas: 0 }, t(101))).toBe(idle);
    const problem = { reason: 'EngineMissing', message: 'Deployment models/qwen does not exist' };
    const degraded = observe(idle, { replicas: 0, readyReplicas: 0, problem }, t(102));
    expect(degraded.phase).toBe('Degraded');
    expect(observe(degraded, { replicas: 0, readyReplicas: 0 }, t(103)).phase).toBe('Idle');
    expect(waitOutcome(idle, ['Ready'], 1)).toBe('done');
    expect(waitOutcome(idle, ['Ready'], 2)).toBe('pending');
    // Without scaling, replicas 0 is a model stopped on purpose: Ready, as before.
    expect(markReady({ ...readyModel(), replicas: 0 }, { generation: 1, readyReplicas: 0 }, t(100)).phase).toBe(
      'Ready',
    );
    expect(phaseForStep('startup', idle)).toBe('Starting');
    expect(phaseForStep('rollout', beginUpdate(idle, 2, t(104), 'generation 2: in place'))).toBe('Updating');
  });
});

describe('teardown', () => {
  it('goes Deleting, then Deleted with what was deleted and retained', () => {
    let status = beginStep(readyModel(), 'rollout', 2, t(10));
    status = beginTeardown(status, 'evaluation done', t(11));
    expect(status.phase).toBe('Deleting');
    expect(status.timeline.filter((e) => e.step === 'rollout').at(-1)).toMatchObject({ outcome: 'Cancelled' });
    status = retryingStep(
      status,
      'teardown',
      { reason: 'TeardownIncomplete', message: 'Service/qwen: 500' },
      1,
      1,
      t(12),
    );
    expect(status.lastError).toMatchObject({ reason: 'TeardownIncomplete', step: 'teardown' });
    status = finishTeardown(
      status,
      { deleted: ['Deployment/qwen'], retained: ['PersistentVolumeClaim/qwen-weights'] },
      2,
      t(15),
    );
    expect(status).toMatchObject({ phase: 'Deleted', lastError: undefined, endpoint: undefined, readyReplicas: 0 });
    expect(status.timeline.at(-1)).toMatchObject({
      step: 'teardown',
      outcome: 'Succeeded',
      durationMs: 4_000,
      detail: 'deleted 1 object(s); retained PersistentVolumeClaim/qwen-weights after 2 attempts (evaluation done)',
    });
  });
});

describe('timeline trimming', () => {
  it('keeps the last entries and every open one', () => {
    let status = beginUpdate(readyModel(), 2, t(10), 'open');
    for (let i = 0; i < 60; i++)
      status = finishStep(beginStep(status, 'rollout', 2, t(11 + i)), 'rollout', 2, t(11 + i));
    const trimmed = trimTimeline(status, 50);
    expect(trimmed.timeline).toHaveLength(51);
    expect(trimmed.timeline[0]!.step).toBe('update');
    expect(trimmed.timeline[0]!.endedAt).toBeUndefined();
    expect(trimmed.timeline.at(-1)).toEqual(status.timeline.at(-1));
  });
});

describe('failure classification', () => {
  const budgets = { pullerDeadline: '2h', startupTimeout: '40m' };
  const activityFailure = (cause: Error, type = 'awaitHealth') =>
    new ActivityFailure('activity failed', type, '1', RetryState.NON_RETRYABLE_FAILURE, 'worker', cause);

  it('keeps the named type of an application failure and whether a retry helps', () => {
    expect(
      classifyFailure(activityFailure(ApplicationFailure.nonRetryable('exit 137', 'OOMKilled')), 'startup', budgets),
    ).toEqual({
      reason: 'OOMKilled',
      message: 'exit 137',
      retryable: false,
    });
    // A type listed as non-retryable ends the reconcile even when thrown as retryable.
    expect(
      classifyFailure(activityFailure(ApplicationFailure.retryable('x', 'NameConflict')), 'claim', budgets).retryable,
    ).toBe(false);
    expect(
      classifyFailure(activityFailure(ApplicationFailure.retryable('timeout', 'ApiUnavailable')), 'claim', budgets),
    ).toEqual({
      reason: 'ApiUnavailable',
      message: 'timeout',
      retryable: true,
    });
  });

  it('turns a long wait running out of budget into the named reason', () => {
    const timeout = new TimeoutFailure('timed out', undefined, 'SCHEDULE_TO_CLOSE');
    expect(classifyFailure(activityFailure(timeout, 'awaitPuller'), 'download', budgets)).toEqual({
      reason: 'DeadlineExceeded',
      message: 'the download did not finish within puller.deadline (2h)',
      retryable: false,
    });
    expect(classifyFailure(activityFailure(timeout), 'startup', budgets)).toMatchObject({
      reason: 'StartupTimeout',
      retryable: false,
    });
    expect(classifyFailure(activityFailure(timeout, 'awaitRollout'), 'rollout', budgets).message).toBe(
      'the engine did not roll out within engine.startupTimeout (40m)',
    );
    expect(classifyFailure(activityFailure(timeout, 'applyStorage'), 'storage', budgets)).toEqual({
      reason: 'Timeout',
      message: 'applyStorage timed out (SCHEDULE_TO_CLOSE)',
      retryable: true,
    });
  });
});

describe('summary for the Web UI', () => {
  it('shows phase, endpoint, last error and the timeline as markdown lists, one step a line', () => {
    const failed = failStep(
      beginStep(readyModel(), 'startup', 2, t(10)),
      'startup',
      { reason: 'OOMKilled', message: 'a|b' },
      2,
      t(11),
    );
    expect(summarizeStatus(failed)).toBe(
      [
        '**models/qwen** on `gpu-a`: **Failed**',
        '',
        '- generation 1 (cluster at 1), 1 of 1 replicas ready, source `huggingface:Qwen/Qwen2.5-0.5B-Instruct@main`',
        '- endpoint: http://qwen.models.svc:8000/v1 (model `qwen`)',
        '- last error at startup: **OOMKilled**: a|b',
        '',
        '**Timeline**',
        '',
        '- claim (gen 1): Succeeded in 1.0s',
        '- storage (gen 1): Succeeded in 1.0s',
        '- download (gen 1): Succeeded in 1.0s',
        '- release (gen 1): Succeeded in 1.0s',
        '- rollout (gen 1): Succeeded in 1.0s',
        '- startup (gen 1): Succeeded in 1.0s',
        '- startup (gen 2): Failed after 1.0s — OOMKilled: a|b',
      ].join('\n'),
    );
  });

  it('shows the load baseline as one list item', () => {
    const baseline = sampleBaseline({ generation: 1, measuredAt: t(5), probes: '1✓ 2✓ 4✓ 8✓ 16✗' });
    expect(summarizeStatus({ ...readyModel(), baseline }).split('\n')).toContain(
      '- load baseline: 8 requests at once per replica meet ttft ≤ 2s and itl ≤ 100ms for 95% (p95 ttft 412 ms, itl 21 ms; measured at generation 1)',
    );
  });

  it('says which step runs, and shows only the latest entries', () => {
    const updating = beginStep(readyModel(), 'rollout', 2, t(10));
    expect(summarizeStatus(updating).split('\n').at(-1)).toBe(
      '- rollout (gen 2): running since 2026-01-01T12:00:10.000Z',
    );
    const timeline = Array.from({ length: 14 }, (_, i) => ({
      step: 'rollout' as const,
      generation: i + 1,
      startedAt: t(i),
      endedAt: t(i + 1),
      durationMs: 1000,
      outcome: 'Succeeded' as const,
    }));
    const lines = summarizeStatus({ ...readyModel(), timeline }).split('\n');
    expect(lines).toContain('**Timeline** (the latest 12 of 14)');
    expect(lines.filter((l) => l.startsWith('- rollout (gen '))).toHaveLength(12);
    expect(lines.at(-1)).toBe('- rollout (gen 14): Succeeded in 1.0s');
  });

  it('keeps text from outside Ferry as plain text on one line', () => {
    const failed = failStep(
      beginStep(readyModel(), 'startup', 2, t(10)),
      'startup',
      {
        reason: 'EngineExited',
        message: 'log said:\n- *boom* in `main_loop` <script>x</script> [here](http://x) ~~a~~ &amp; \\',
      },
      2,
      t(11),
    );
    const escaped =
      'log said: - \\*boom\\* in \\`main\\_loop\\` \\<script\\>x\\</script\\> \\[here\\](http://x) \\~\\~a\\~\\~ \\&amp; \\\\';
    const lines = summarizeStatus(failed).split('\n');
    expect(lines).toContain(`- last error at startup: **EngineExited**: ${escaped}`);
    expect(lines.at(-1)).toBe(`- startup (gen 2): Failed after 1.0s — EngineExited: ${escaped}`);
  });

  it('formats durations and sizes for people', () => {
    expect([950, 12_340, 245_000, 3_725_000].map(formatDuration)).toEqual(['950ms', '12.3s', '4m 05s', '1h 02m']);
    expect([512, 1536, 6_000_000_000].map(formatBytes)).toEqual(['512 B', '1.5 KiB', '5.6 GiB']);
  });
});

describe('spec changes', () => {
  it('lists the dotted paths that differ, ignoring key order', () => {
    const next = parseServedModel({
      ...spec,
      metadata: { ...spec.metadata, labels: { team: 'ml' } },
      spec: { ...spec.spec, replicas: 2, engine: { ...spec.spec.engine, args: ['--enforce-eager'] } },
    });
    expect(specChanges(spec, next)).toEqual(['metadata.labels.team', 'spec.engine.args', 'spec.replicas']);
    expect(specChanges(spec, parseServedModel(JSON.parse(JSON.stringify(spec))))).toEqual([]);
    expect(sameJson({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(true);
    expect(sameJson([1, 2], [2, 1])).toBe(false);
  });

  it('calls a change of the weights or of the engine pods a new revision, and nothing else', () => {
    const spec0 = {
      apiVersion: 'ferry.dev/v1alpha1',
      kind: 'ServedModel',
      metadata: { name: 'qwen', namespace: 'models' },
    };
    const base = { cluster: 'gpu-a', source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } } };
    const model = (spec: object) => parseServedModel({ ...spec0, spec: { ...base, ...spec } });
    const changed = (next: object, from: object = {}) => newRevision(model(from), model(next));
    expect(changed({})).toBe(false);
    expect(changed({ replicas: 3 })).toBe(false);
    expect(changed({ front: {} })).toBe(false);
    const lora = { engine: { lora: { enabled: true } } };
    const adapter = { name: 'sql', source: { huggingface: { repo: 'acme/sql-lora' } } };
    expect(changed({ engine: { lora: { enabled: true, adapters: [adapter] } } }, lora)).toBe(false);
    expect(changed(lora)).toBe(true);
    expect(changed({ source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'v2' } } })).toBe(true);
    expect(changed({ engine: { args: ['--enforce-eager'] } })).toBe(true);
    expect(changed({ engine: { image: 'vllm/vllm-openai:v0.33.0' } })).toBe(true);
    expect(changed({ resources: { gpus: 2 } })).toBe(true);

    // An undo: the revision before's weights and pods, with everything else (and the adapters) as they are now.
    const before = model({ engine: { args: ['--enforce-eager'], lora: { enabled: true } }, resources: { gpus: 2 } });
    const now = model({
      replicas: 3,
      front: {},
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'v2' } },
      engine: { lora: { enabled: true, adapters: [adapter] } },
    });
    const undone = withRevisionOf(now, before);
    expect(newRevision(undone, before)).toBe(false);
    expect(specChanges(now, undone).sort()).toEqual([
      'spec.engine.args',
      'spec.resources.gpus',
      'spec.source.huggingface.revision',
    ]);
    expect(undone.spec.engine.lora.adapters).toEqual(now.spec.engine.lora.adapters);
    expect(undone.spec.engine.lora.adapters).toHaveLength(1);
    expect(undone.spec).toMatchObject({ replicas: 3, front: {} });
  });
});

describe('identity', () => {
  it('names the workflow and the task queue after the model and its cluster', () => {
    expect(workflowIdFor(modelRefOf(spec))).toBe('servedmodel/gpu-a/models/qwen');
    expect(taskQueueFor('gpu-a')).toBe('ferry-gpu-a');
    expect(searchAttributesFor(modelRefOf(spec), 'Ready').map((p) => [p.key.name, p.value])).toEqual([
      ['FerryPhase', 'Ready'],
      ['FerryModel', 'qwen'],
      ['FerryNamespace', 'models'],
      ['FerryCluster', 'gpu-a'],
    ]);
  });
});

describe('LoRA adapters in status', () => {
  const sync = (adapters: AdapterSyncResult['adapters'], replicas = 2): AdapterSyncResult => ({
    adapters,
    unloaded: [],
    incarnations: Array.from({ length: replicas }, (_, i) => `qwen-${i}/0000000${i}/0`),
  });

  it('an adapter is Loaded only on every ready replica; a refusal is Failed, a silence Missing', () => {
    const statuses = adapterStatuses(
      ['sql', 'chat', 'code'],
      { fetched: ['sql', 'chat', 'code'], failed: [] },
      sync([
        { name: 'sql', loadedReplicas: 2, readyReplicas: 2 },
        {
          name: 'chat',
          loadedReplicas: 1,
          readyReplicas: 2,
          error: { reason: 'AdapterRefused', message: 'pod b: rank 64 above 16 (HTTP 400)', permanent: true },
        },
        {
          name: 'code',
          loadedReplicas: 0,
          readyReplicas: 2,
          error: { reason: 'EngineUnreachable', message: 'pod a: no answer within 10 s', permanent: false },
        },
      ]),
    );
    expect(statuses).toEqual([
      { name: 'sql', state: 'Loaded', loadedReplicas: 2, readyReplicas: 2 },
      {
        name: 'chat',
        state: 'Failed',
        loadedReplicas: 1,
        readyReplicas: 2,
        reason: 'AdapterRefused',
        message: 'pod b: rank 64 above 16 (HTTP 400)',
      },
      {
        name: 'code',
        state: 'Missing',
        loadedReplicas: 0,
        readyReplicas: 2,
        reason: 'EngineUnreachable',
        message: 'pod a: no answer within 10 s',
      },
    ]);
    expect(adapterProblem(statuses)).toEqual({
      reason: 'AdapterFailed',
      message:
        'adapter chat failed (loaded on 1 of 2 ready replicas): pod b: rank 64 above 16 (HTTP 400); ' +
        'adapter code is missing (loaded on 0 of 2 ready replicas): pod a: no answer within 10 s',
    });
    expect(adapterProblem(statuses.slice(0, 1))).toBeUndefined();
    expect(adapterProblem(statuses.slice(2))?.reason).toBe('AdapterMissing');
  });

  it("the Job's failure explains an adapter that is not on the replicas: the puller's words, permanent or not", () => {
    const [missing, gone, unseen] = adapterStatuses(
      ['sql', 'chat', 'later'],
      {
        fetched: [],
        failed: [
          { name: 'sql', reason: 'DeadlineExceeded', message: 'ran out of time', permanent: false },
          { name: 'chat', reason: 'SourceNotFound', message: 'the repository does not exist', permanent: true },
        ],
      },
      // The engines were not asked for the two without files (nor for `later`, listed since).
      sync([], 1),
    );
    expect(missing).toEqual({
      name: 'sql',
      state: 'Missing',
      loadedReplicas: 0,
      readyReplicas: 1,
      reason: 'DeadlineExceeded',
      message: 'ran out of time',
    });
    expect(gone).toMatchObject({ state: 'Failed', reason: 'SourceNotFound', message: 'the repository does not exist' });
    expect(unseen).toEqual({ name: 'later', state: 'Missing', loadedReplicas: 0, readyReplicas: 1 });
  });

  it('new engine pods have forgotten the adapters; a Failed one stays Failed', () => {
    const status: ModelStatus = {
      ...readyModel(),
      adapters: [
        { name: 'sql', state: 'Loaded', loadedReplicas: 2, readyReplicas: 2 },
        { name: 'bad', state: 'Failed', loadedReplicas: 0, readyReplicas: 2, reason: 'AdapterRefused', message: 'no' },
      ],
    };
    expect(adaptersForgotten(status, ['qwen-abc'], 2).adapters).toEqual([
      {
        name: 'sql',
        state: 'Missing',
        loadedReplicas: 1,
        readyReplicas: 2,
        reason: 'AdapterMissing',
        message: 'not loaded yet on the new engine pod qwen-abc',
      },
      status.adapters![1],
    ]);
  });

  it('a wait for Ready ends as failed when an adapter was refused for good, not while one is only missing', () => {
    const degraded = (reason: string): ModelStatus =>
      observe(readyModel(), { replicas: 1, readyReplicas: 1, problem: { reason, message: 'adapter sql …' } }, t(30));
    expect(waitOutcome(degraded('AdapterFailed'), ['Ready'], 1)).toBe('failed');
    expect(waitOutcome(degraded('AdapterMissing'), ['Ready'], 1)).toBe('pending');
    expect(waitOutcome(degraded('AdapterFailed'), ['Ready'], 2)).toBe('pending');
  });

  it('the Web UI details list each adapter', () => {
    const status: ModelStatus = {
      ...readyModel(),
      adapters: [{ name: 'sql', state: 'Missing', loadedReplicas: 0, readyReplicas: 1, message: 'pod a: no answer' }],
    };
    expect(summarizeStatus(status)).toContain(
      '- adapter `sql`: **Missing** on 0 of 1 ready replicas: pod a: no answer',
    );
  });
});
