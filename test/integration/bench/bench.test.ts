// The benchmarks' small slice, run with the suite after the other integration tests, alone: these kill workers,
// inject faults and time reactions (the full runs are `npm run bench:reactions`, `npm run chaos`, …; docs/performance.md
// has their results). The slices whose checks count rather than time run beside the integration tests
// (test/integration/bench-slices/).
import { describe, expect, it } from 'vitest';
import { bench } from '../../support/bench.js';

describe('benchmarks, small slice', { timeout: 300_000 }, () => {
  it('upgrade: three Ready models move to a new worker version with no engine pod replaced, no activity and one timer each', async ({
    signal,
  }) => {
    // Its own deadline, before the test's: a run that stops there says what it was waiting for, in this test's error.
    const result = await bench('upgrade.ts', ['--models', '3', '--deadline', '240'], signal);
    expect(result).toMatchObject({ config: { models: 3 }, enginePodsBefore: 3, enginePodsReplaced: 0 });
    // One move is 10 events: the wake (a signal and its workflow task), the continue-as-new, and the new run's start,
    // first workflow task and look timer. Under the suite's load a wake can come before the switch reaches the run,
    // which then moves at the next one, 30 s later: a signal and its workflow task more. What Ferry does is checked
    // exactly (no activity, no timer but the new run's one); workflow tasks only within bounds, as a loaded server
    // may time one out and retry it — the whole breakdown is in the message.
    const busiest = result.busiestModelEvents as Record<string, number>;
    const breakdown = JSON.stringify(result.busiestModelEvents);
    const wakes = busiest.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED ?? 0;
    expect(wakes, breakdown).toBeGreaterThanOrEqual(1);
    expect(wakes, breakdown).toBeLessThanOrEqual(2);
    const ferrys = Object.fromEntries(Object.entries(busiest).filter(([type]) => !/WORKFLOW_TASK_/.test(type)));
    expect(ferrys, breakdown).toEqual({
      EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: wakes,
      EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: 1,
      EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: 1,
      EVENT_TYPE_TIMER_STARTED: 1,
    });
    // A workflow task for each wake and the new run's first (one more if a slow task heartbeat); none failed.
    expect(busiest.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, breakdown).toBeGreaterThanOrEqual(wakes + 1);
    expect(busiest.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, breakdown).toBeLessThanOrEqual(wakes + 2);
    expect(busiest.EVENT_TYPE_WORKFLOW_TASK_FAILED ?? 0, breakdown).toBe(0);
  });

  it('scaling: out under load and back, no failed request, no history event while the load holds steady; to zero after a quiet minute, and a request at zero answered', async () => {
    const result = await bench('scaling.ts', [
      ...['--rounds', '1', '--steady', '20s', '--up', '2s', '--down', '5s', '--interval', '1s', '--idle', '1m'],
    ]);
    const [round] = result.rounds as {
      decisions: string[];
      steadyEvents: number;
      failed: number;
      answered: number;
      zero: { idleAfterS: number; status: number; firstTokenS?: number; done: boolean };
    }[];
    expect(round!.zero).toMatchObject({ status: 200, done: true, firstTokenS: expect.any(Number) });
    // A minute from the last reading that saw the load, which may come a reading before its end.
    expect(round!.zero.idleAfterS).toBeGreaterThanOrEqual(55);
    // Up to 3 (in one step, or two if the first reading caught the load still arriving), then down by halves to 1.
    expect(round!.decisions.at(0)).toMatch(/^1 → [23] replicas$/);
    expect(round!.decisions.slice(-2)).toEqual(['3 → 2 replicas', '2 → 1 replicas']);
    expect(round!.steadyEvents).toBe(0);
    expect(round!.failed).toBe(0);
    expect(round!.answered).toBeGreaterThan(0);
  });

  it('reactions: two models, one trial of each, every reaction seen', async () => {
    // One trial: its `ferry update` and `ferry delete` processes send their update before the SDK loads and print the
    // answer without it (the full run takes turns with the SDK sending, and deletes from the library too); the model
    // is served again after its delete.
    const result = await bench('reactions.ts', ['--trials', '1', '--models', '2', '--pvc-trials', '1']);
    const summary = result.summary as Record<string, { n: number; p50Ms: number }>;
    expect(Object.keys(summary)).toEqual([
      'serve → Ready (instant simulated stages)',
      'pod deleted → Degraded',
      'engine crash-looping → Degraded',
      'Service deleted → re-created',
      'Deployment deleted → re-created',
      'update call → Deployment patched',
      'ferry update (process start, cli) → Deployment patched',
      'ferry update (cli): the whole command, start to exit',
      'ferry delete (process start, cli) → Deployment deleted',
      'ferry delete (cli): the whole command, start to exit',
      'PVC deleted → not Ready (Degraded, then rebuilding)',
      'PVC deleted → Ready again on a new volume',
    ]);
    for (const [name, s] of Object.entries(summary)) expect(s.n, name).toBe(name.startsWith('serve') ? 2 : 1);
  });

  // A baseline and three killed operations (a serve, an update and a delete of one model) take about 100 s on a quiet
  // machine. Both this slice and the full run (`npm run chaos`) replay every model's history at the end, which finds a
  // history that would leave its workflow stuck on a nondeterminism error even when its trial converged (a kill during
  // an update once did: docs/resilience.md, "A wake and an update split by a query").
  it(
    'chaos (a): a serve, an update and a delete, each with the worker SIGKILLed in it, converge with nothing extra',
    {
      timeout: 600_000,
    },
    async ({ signal }) => {
      const args = ['--parts', 'kills', '--kills', '3', '--baseline', '1'];
      const result = await bench('chaos.ts', args, signal);
      const kills = result.kills as { summary: Record<string, unknown>; trials: { kind: string; killAtMs: number }[] };
      expect(kills.summary).toMatchObject({
        trials: 3,
        converged: 3,
        duplicates: 0,
        orphans: 0,
        falseReadySamples: 0,
        spuriousExits: 0,
        // Every model's history replays with the code that made it: the baseline's model and the trials' one.
        historiesReplayed: 2,
        historiesNotReplaying: 0,
      });
      expect(kills.trials.map((t) => t.kind)).toEqual(['serve', 'update', 'delete']);
      expect(kills.trials.every((t) => t.killAtMs >= 0)).toBe(true);
    },
  );

  it('chaos (b): one model at 20 % API faults and one fault-free converge; an API outage shows in status', async ({
    signal,
  }) => {
    const args = ['--parts', 'faults', '--fault-rounds', '1', '--outages', 'claim', '--outage', '5'];
    const result = await bench('chaos.ts', args, signal);
    const faults = result.faults as { summary: Record<string, unknown> & { outages: { visibleMs: number }[] } };
    expect(faults.summary).toMatchObject({
      models: 2,
      converged: 2,
      duplicates: 0,
      orphans: 0,
      falseReadySamples: 0,
      spuriousExits: 0,
      outages: [{ step: 'claim', converged: true, exit: 0 }],
    });
    // The faulted model met faults; the outage showed in status within the 5 s the issue allows.
    expect(Object.values(faults.summary.injected as Record<string, number>).reduce((a, b) => a + b, 0)).toBeGreaterThan(
      0,
    );
    expect(faults.summary.outages[0]!.visibleMs).toBeLessThan(5_000);
  });

  it('baseline: one model at --max-num-seqs 4 is measured as predicted, and admission turns twice that into 4 and 4 429s', async ({
    signal,
  }) => {
    const result = await bench('baseline.ts', ['--seqs', '4', '--repeats', '1'], signal);
    expect(result.capacity).toEqual([
      expect.objectContaining({ maxNumSeqs: 4, predicted: 4, tolerance: 1, withinTolerance: true }),
    ]);
    const [row] = result.capacity as { measured: number[]; admission: Record<string, number> }[];
    const limit = row!.measured[0]!;
    expect(row!.admission).toMatchObject({
      limit,
      sent: 2 * limit,
      admitted: limit,
      turnedAway: limit,
      withRetryAfter: limit,
      admittedMeetingGoal: limit,
      other: 0,
    });
  });
});
