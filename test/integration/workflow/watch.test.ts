// The watch that reconciles, as the workflow sees it: a Ready model is looked at only when the worker's watch wakes it
// (a `modelChanged` signal) or the safety net comes due; the look carries a reference, not the spec; what it repairs
// is a timeline entry; a lost volume runs the whole sequence again, back to Ready without a person.
import { describe, expect, it } from 'vitest';
import { modelChangedSignal, statusQuery, type LookInput } from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { FAST, modelDoc, phaseIs, readyAt, waitForStatus, withWorker } from '../../support/workflow-harness.js';

const harness = useHarness();

/** A Ready model's looks come from wakes alone: the safety net is an hour away. */
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('ServeModelWorkflow watch', () => {
  it('looks only when woken, by reference, and a quiet look writes a handful of history events', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, readyAt(1));
      // Nothing wakes it: no look (the old path looked every 200 ms with these options).
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(stub.callsOf('lookAtModel')).toHaveLength(0);

      const before = (await handle.fetchHistory()).events!.length;
      await handle.signal(modelChangedSignal, { objects: [`Pod/${doc.metadata.name}-abc`] });
      await until(() => stub.callsOf('lookAtModel').some((c) => c.outcome === 'returned'));
      const [look] = stub.callsOf('lookAtModel');
      const input: LookInput = look!.input;
      expect(input).toEqual({
        ref: { cluster: 'test', namespace: 'models', name: doc.metadata.name },
        generation: 1,
        rootUid: `uid-${doc.metadata.name}`,
        sourceHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        engineGeneration: 1,
      });
      expect(JSON.stringify(input)).not.toContain('huggingface');
      // Let the look's result be recorded, then count: the signal, two workflow tasks, the activity's three events
      // (no timer: the safety net's one timer is kept across wakes).
      await until(() => false, 500).catch(() => undefined);
      const events = (await handle.fetchHistory()).events!.length - before;
      expect(events).toBeGreaterThanOrEqual(7);
      expect(events).toBeLessThanOrEqual(10);
      expect((await handle.query(statusQuery)).phase).toBe('Ready');
    });
  });

  it('spaces a look woken right after another inside the look, not with a timer, and names each look', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: [`Pod/${doc.metadata.name}-a`] });
      await until(() => stub.callsOf('lookAtModel').some((c) => c.outcome === 'returned'));
      await handle.signal(modelChangedSignal, { objects: [`Pod/${doc.metadata.name}-b`] });
      await until(() => stub.callsOf('lookAtModel').filter((c) => c.outcome === 'returned').length === 2);
      const [first, second] = stub.callsOf('lookAtModel');
      expect(first!.input.delayMs).toBeUndefined();
      // Woken well within a second of the first look: the second waits out the rest of that second itself.
      expect(second!.input.delayMs).toBeGreaterThan(0);
      expect(second!.input.delayMs).toBeLessThanOrEqual(1_000);
      const events = (await handle.fetchHistory()).events!;
      // One timer in the run: the safety net's.
      expect(events.filter((e) => e.timerStartedEventAttributes)).toHaveLength(1);
      const looks = events
        .map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => a?.activityType?.name === 'lookAtModel')
        .map((a) => a!.activityId);
      expect(looks).toEqual(['lookAtModel/1/1', 'lookAtModel/1/2']);
    });
  });

  it('records what a look repaired in the timeline and stays Ready', async () => {
    const stub = new StubActivities().once('lookAtModel', async () => ({
      replicas: 1,
      readyReplicas: 1,
      repaired: ['Service/qwen deleted; re-applied', 'Deployment/qwen scaled to 3 by kubectl; back to 1'],
      engineGeneration: 7,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc(), QUIET);
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: ['Service/qwen'] });
      const repaired = await waitForStatus(handle, (s) => s.timeline.some((e) => e.step === 'repair'));
      expect(repaired.phase).toBe('Ready');
      expect(repaired.timeline.at(-1)).toMatchObject({
        step: 'repair',
        outcome: 'Succeeded',
        generation: 1,
        detail: 'Service/qwen deleted; re-applied; Deployment/qwen scaled to 3 by kubectl; back to 1',
      });
      // The next look is told the repaired Deployment's generation.
      await handle.signal(modelChangedSignal, { objects: ['Deployment/qwen'] });
      await until(() => stub.callsOf('lookAtModel').length === 2);
      expect(stub.callsOf('lookAtModel')[1]!.input.engineGeneration).toBe(7);
    });
  });

  it('turns a lost volume into Degraded at once, then runs the whole sequence again back to Ready', async () => {
    const lost = {
      object: 'PersistentVolumeClaim/qwen-weights',
      reason: 'VolumeTerminating',
      message: 'the weights volume models/qwen-weights is being deleted',
    };
    const stub = new StubActivities().once('lookAtModel', async () => ({
      replicas: 1,
      readyReplicas: 1,
      repaired: [],
      lost,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc(), QUIET);
      await waitForStatus(handle, readyAt(1));
      const second = stub.gate('claimName');
      const from = stub.names().length;
      await handle.signal(modelChangedSignal, { objects: [lost.object] });
      await second.reached;
      const degraded = await handle.query(statusQuery);
      expect(degraded.phase).not.toBe('Ready');
      expect(degraded.timeline.some((e) => e.step === 'degraded')).toBe(true);
      expect(degraded.timeline.filter((e) => e.step === 'update').at(-1)?.detail).toBe(
        `generation 1: rebuild (${lost.message})`,
      );
      second.release();
      const ready = await waitForStatus(handle, (s) => s.phase === 'Ready' && stub.names().length > from + 8);
      expect(stub.names().slice(from)).toEqual([
        'lookAtModel',
        'scaleEngine',
        'claimName',
        'applyStorage',
        'startPuller',
        'awaitPuller',
        'releaseVolume',
        'applyEngine',
        'awaitRollout',
        'awaitHealth',
      ]);
      expect(stub.callsOf('scaleEngine')[0]!.input.replicas).toBe(0);
      expect(ready.generation).toBe(1);
      expect(ready.lastError).toBeUndefined();
      const update = ready.timeline.filter((e) => e.step === 'update').at(-1);
      expect(update).toMatchObject({ outcome: 'Succeeded', detail: expect.stringContaining('rebuild') });
    });
  });

  it("keeps a Degraded model's backoff timer across a wake, cancelling no timer", async () => {
    const stub = new StubActivities().on('lookAtModel', async () => ({
      replicas: 1,
      readyReplicas: 0,
      repaired: [],
      problem: { reason: 'Unhealthy', message: 'HTTP 503 from /health' },
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc(), { ...QUIET, watchIntervalMs: 30_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: ['Pod/qwen-abc'] });
      await waitForStatus(handle, phaseIs('Degraded'));
      // Woken while the backoff's timer runs: a look, and the timer goes on (a wake that cancelled it would make the
      // run's commands depend on how the SDK splits a wake and an update into activations; docs/resilience.md).
      const looks = stub.callsOf('lookAtModel').length;
      await handle.signal(modelChangedSignal, { objects: ['Pod/qwen-def'] });
      await until(() => stub.callsOf('lookAtModel').length > looks);
      // The backoff's own looks go on: 1 s, 2 s, … after the first.
      await until(() => stub.callsOf('lookAtModel').length >= looks + 2, 10_000);
      const events = (await handle.fetchHistory()).events!;
      expect(events.filter((e) => e.timerCanceledEventAttributes)).toEqual([]);
      expect(events.filter((e) => e.timerFiredEventAttributes).length).toBeGreaterThanOrEqual(1);
    });
  });

  it('looks at a Degraded model again within seconds, so it gets well without a wake', async () => {
    let sick = true;
    const stub = new StubActivities().on('lookAtModel', async () => ({
      replicas: 1,
      readyReplicas: 1,
      repaired: [],
      ...(sick ? { problem: { reason: 'Unhealthy', message: 'HTTP 503 from /health' } } : {}),
    }));
    await withWorker(harness, stub, async ({ start }) => {
      // The watch interval is the production one: only the Degraded backoff (1 s, 2 s, …) can look in time.
      const handle = await start(modelDoc(), { ...QUIET, watchIntervalMs: 30_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: ['Pod/qwen-abc'] });
      await waitForStatus(handle, phaseIs('Degraded'));
      sick = false;
      const ready = await waitForStatus(handle, phaseIs('Ready'), 5_000);
      expect(ready.timeline.at(-1)).toMatchObject({ step: 'degraded', outcome: 'Succeeded' });
    });
  });
});
