// GPU-seconds in status (workflows/status/usage.ts): counted at each change of the GPUs the ready replicas hold, from
// workflow time, told to the worker as `usage` events (a counter, no log line, no Kubernetes Event).
import { describe, expect, it } from 'vitest';
import { parseServedModel, usageAt, type ModelStatus } from '../../workflows/contract/index.js';
import { statusEvents } from '../../workflows/status/events.js';
import { initialStatus } from '../../workflows/status/transitions.js';
import { withUsage } from '../../workflows/status/usage.js';
import { kubernetesEvent, reportModelEvents } from '../../worker/model-events.js';
import { formatStatus } from '../../client/cli/format.js';
import { minimalHf } from './fixtures.js';

const T0 = '2026-12-05T10:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(T0) + seconds * 1000).toISOString();
const base: ModelStatus = { ...initialStatus(parseServedModel(minimalHf), T0), phase: 'Ready' };
const ready = (status: ModelStatus, readyReplicas: number): ModelStatus => ({ ...status, readyReplicas });

describe('GPU-seconds', () => {
  it('starts with the first ready replica, grows with the GPUs held, and stops once deleted', () => {
    let s = withUsage(base, ready(base, 0), 2, at(0));
    expect(s.usage).toBeUndefined();
    s = withUsage(s, ready(s, 1), 2, at(10));
    expect(s.usage).toEqual({ gpuSeconds: 0, gpus: 2, asOf: at(10) });
    // Three replicas ready at 70 s: 60 s at 2 GPUs.
    s = withUsage(s, ready(s, 3), 2, at(70));
    expect(s.usage).toEqual({ gpuSeconds: 120, gpus: 6, asOf: at(70) });
    // Read at 100 s without a change: 120 + 6 × 30.
    expect(usageAt(s.usage!, at(100))).toBe(300);
    s = withUsage(s, { ...s, phase: 'Deleted' }, 2, at(100));
    expect(s.usage).toEqual({ gpuSeconds: 300, gpus: 0, asOf: at(100) });
    expect(usageAt(s.usage!, at(1000))).toBe(300);
  });

  it('leaves a status alone while the GPUs held stay the same', () => {
    const counted = withUsage(base, ready(base, 1), 1, at(0));
    const later = { ...counted, updatedAt: at(50) };
    expect(withUsage(counted, later, 1, at(50))).toBe(later);
    // A transition that built the next status without the usage keeps it.
    const { usage: _dropped, ...without } = later;
    expect(withUsage(counted, without, 1, at(50)).usage).toBe(counted.usage);
  });

  it('is told to the worker as the GPU-seconds added, counted and neither logged nor posted', () => {
    const before = withUsage(base, ready(base, 1), 1, at(0));
    const after = withUsage(before, ready(before, 2), 1, at(30));
    const events = statusEvents(before, after);
    expect(events).toEqual([{ kind: 'usage', gpuSeconds: 30 }]);
    expect(kubernetesEvent(events[0]!)).toEqual([]);
    const lines: string[] = [];
    const counted: number[] = [];
    const log = (message: string) => void lines.push(message);
    const logger = { info: log, warn: log, error: log, debug: log, trace: log, log };
    const metrics = { record: (e: readonly { kind: string }[]) => void counted.push(e.length) };
    reportModelEvents(
      { logger: logger, metrics: metrics as never },
      { workflowId: 'w' },
      { cluster: 'c', namespace: 'n', name: 'm' },
      events,
    );
    expect(lines).toEqual([]);
    expect(counted).toEqual([1]);
  });

  it('shows in ferry status, up to now, beside the scaling', () => {
    const status: ModelStatus = {
      ...base,
      readyReplicas: 2,
      usage: { gpuSeconds: 3600, gpus: 2, asOf: at(0) },
      scaling: {
        replicas: 2,
        minReplicas: 1,
        maxReplicas: 4,
        targetConcurrency: 6,
        decisions: 1,
        lastDecision: { at: at(0), from: 1, to: 2, reason: 'load 9 over target 6' },
      },
    };
    const text = formatStatus(status, new Date(at(1800)));
    expect(text).toMatch(/ scaling: +2 replicas \(1–4, 6 requests in flight each\)/);
    expect(text).toMatch(/ last scale: +1 → 2, 30m ago: load 9 over target 6/);
    // 3600 + 2 × 1800 GPU-seconds.
    expect(text).toMatch(/ usage: +2\.00 GPU-hours by ready replicas \(2 GPUs held now\)/);
  });
});
