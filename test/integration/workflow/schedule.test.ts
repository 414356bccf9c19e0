// spec.scaling.schedule as the workflow keeps it (docs/design/scaling.md): one timer until the floor next changes;
// a window that opens raises the count to its minReplicas (the engine applied again, no rollout) and keeps the
// autoscaler's decisions above it; one that closes lowers the floor and leaves the count to the autoscaler. A window
// every minute, open 20 s, so that a test sees both within a minute and a half.
import { describe, expect, it } from 'vitest';
import { FAILURE, scaleSignal, updateModelUpdate } from '../../../workflows/contract/index.js';
import { failure, StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { FAST, modelDoc, phaseIs, readyAt, waitForStatus, withWorker } from '../../support/workflow-harness.js';

const harness = useHarness();
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };
const WINDOW = { cron: '* * * * *', minReplicas: 2, for: '20s' };
const SCALING = { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2, schedule: [WINDOW] };
const POLICY = { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 };

/** Waits until the clock is between `from` and `to` seconds into a minute. */
async function atSecond(from: number, to: number): Promise<void> {
  for (;;) {
    const s = new Date().getUTCSeconds();
    if (s >= from && s < to) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('ServeModelWorkflow schedule', () => {
  it('raises the floor while a window is open, refuses decisions below it, and lowers it when the window closes', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      // Started with the window closed (it opens at each minute's second 0).
      await atSecond(25, 40);
      const nextMinute = new Date(Math.ceil((Date.now() + 1) / 60_000) * 60_000).toISOString();
      const doc = modelDoc((d) => (d.spec.scaling = SCALING));
      const handle = await start(doc, QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.scaling).toMatchObject({
        replicas: 1,
        minReplicas: 1,
        schedule: { minReplicas: 1, nextChangeAt: nextMinute, nextMinReplicas: 2 },
      });
      expect(stub.callsOf('applyEngine')[0]!.input).toMatchObject({ replicas: 1, scaling: POLICY });

      // The window opens: the engine applied again at 2, the policy's floor 2; the next change is its close.
      const opened = await waitForStatus(handle, (s) => s.scaling?.minReplicas === 2, 60_000);
      expect(opened.scaling).toMatchObject({
        replicas: 2,
        schedule: {
          minReplicas: 2,
          nextChangeAt: new Date(Date.parse(nextMinute) + 20_000).toISOString(),
          nextMinReplicas: 1,
        },
      });
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({
        replicas: 2,
        scaling: { ...POLICY, minReplicas: 2 },
      });
      expect(opened.timeline.filter((e) => e.step === 'scale').map((e) => e.detail)).toEqual([
        '1 → 2 replicas: the schedule asks for at least 2',
      ]);
      // The autoscaler cannot take it below the window's floor meanwhile.
      await handle.signal(scaleSignal, { replicas: 1, from: 2, reason: 'quiet' });

      // The window closes: the floor back to 1, the count left at 2 for the autoscaler.
      const closed = await waitForStatus(handle, (s) => s.scaling?.minReplicas === 1, 30_000);
      expect(closed.scaling).toMatchObject({ replicas: 2, decisions: 0, schedule: { minReplicas: 1 } });
      expect(stub.callsOf('scaleEngine')).toEqual([]);
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ replicas: 2, scaling: POLICY });
      // Now it can.
      await handle.signal(scaleSignal, { replicas: 1, from: 2, reason: 'quiet' });
      await waitForStatus(handle, (s) => s.scaling?.replicas === 1);
      expect(stub.callsOf('scaleEngine').map((c) => c.input.replicas)).toEqual([1]);

      // The schedule removed by an update: no floor of its own, nothing shown of it.
      doc.spec.scaling = { ...SCALING, schedule: undefined };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const updated = await waitForStatus(handle, readyAt(2));
      expect(updated.scaling?.schedule).toBeUndefined();
      expect(updated.scaling?.minReplicas).toBe(1);

      // What it cost: a timer for each change of the floor (two) and the first, nothing else scheduled.
      const history = await handle.fetchHistory();
      const timers = history.events!.filter((e) => e.timerStartedEventAttributes);
      const safetyNet = timers.filter(
        (e) => Number(e.timerStartedEventAttributes!.startToFireTimeout?.seconds) >= 3_000,
      );
      expect(timers.length - safetyNet.length).toBeLessThanOrEqual(3);
      await handle.terminate('test finished');
    });
  });

  it('applies nothing to a Failed model when a window opens: the floor waits for the reconcile that fixes it', async () => {
    const stub = new StubActivities().throwOnce(
      'awaitHealth',
      failure(FAILURE.CrashLoopBackOff, 'vllm exited with code 1: unrecognized arguments: --max-model-len=oops'),
    );
    await withWorker(harness, stub, async ({ start }) => {
      await atSecond(25, 40);
      const doc = modelDoc((d) => (d.spec.scaling = SCALING));
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, phaseIs('Failed'));
      const applies = stub.callsOf('applyEngine').length;
      // The window opens: the floor is shown, and nothing is applied.
      const opened = await waitForStatus(handle, (s) => s.scaling?.minReplicas === 2, 60_000);
      expect(opened.phase).toBe('Failed');
      expect(opened.scaling?.schedule).toMatchObject({ minReplicas: 2, nextMinReplicas: 1 });
      expect(stub.callsOf('applyEngine')).toHaveLength(applies);
      // The update that fixes it rolls out at the floor, if the window is still open, else at the spec's count.
      doc.metadata.labels = { fixed: 'yes' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const fixed = await waitForStatus(handle, readyAt(2));
      const rolled = stub.callsOf('applyEngine').at(applies)!.input;
      expect(rolled.replicas).toBe(rolled.scaling?.minReplicas === 2 ? 2 : 1);
      expect(fixed.scaling?.replicas).toBe(rolled.replicas);
      await handle.terminate('test finished');
    });
  });

  it('wakes a model at zero when a window opens: Starting, then Ready at the floor; zero allowed again once it closes', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      await atSecond(25, 40);
      const doc = modelDoc((d) => {
        d.spec.scaling = { ...SCALING, idleToZeroAfter: '30m' };
        d.spec.front = {};
      });
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, readyAt(1));
      await handle.signal(scaleSignal, { replicas: 0, from: 1, reason: 'no request for 30m 00s' });
      await waitForStatus(handle, phaseIs('Idle'));

      // The window opens: the engine applied again at its floor, and the model starts as a woken one does.
      const awake = await waitForStatus(handle, (s) => s.phase === 'Ready' && s.replicas === 2, 60_000);
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ replicas: 2, scaling: { minReplicas: 2 } });
      expect(stub.callsOf('applyEngine').at(-1)!.input.scaling?.idleToZeroAfterMs).toBeUndefined();
      expect(awake.timeline.filter((e) => e.step === 'scale').map((e) => e.detail)).toEqual([
        '1 → 0 replicas: no request for 30m 00s',
        '0 → 2 replicas: the schedule asks for at least 2',
      ]);
      expect(awake.timeline.at(-1)).toMatchObject({ step: 'startup', outcome: 'Succeeded' });
      // A decision to zero while it is open: dropped.
      await handle.signal(scaleSignal, { replicas: 0, from: 2, reason: 'quiet' });
      // It closes: the policy carries idleToZeroAfterMs again, and a decision to zero is taken.
      await waitForStatus(handle, (s) => s.scaling?.minReplicas === 1, 60_000);
      expect(stub.callsOf('scaleEngine')).toHaveLength(1);
      expect(stub.callsOf('applyEngine').at(-1)!.input.scaling).toMatchObject({ idleToZeroAfterMs: 1_800_000 });
      await handle.signal(scaleSignal, { replicas: 0, from: 2, reason: 'quiet again' });
      await waitForStatus(handle, phaseIs('Idle'));
    });
  });
});
