// A model with spec.scaling as the workflow sees it (docs/design/scaling.md): the autoscaler's decisions arrive as
// `ferry.scale` signals; one made against the count in force is applied by scaleEngine alone and recorded, a stale or
// out-of-bounds one is dropped; every later apply and look uses the count in force; the target comes from the
// measured baseline when the spec gives none. With idleToZeroAfter and a front: a decision to 0 makes the model Idle
// (not Degraded), and the wake makes it Starting until /health answers, then Ready.
import { describe, expect, it } from 'vitest';
import {
  modelChangedSignal,
  scaleSignal,
  updateModelUpdate,
  type ModelStatus,
} from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { FAST, modelDoc, readyAt, waitForStatus, withWorker } from '../../support/workflow-harness.js';

const harness = useHarness();
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };
const SCALING = { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2, scaleUpAfter: '3s', scaleDownAfter: '1m' };
const POLICY = {
  minReplicas: 1,
  maxReplicas: 4,
  targetConcurrency: 2,
  scaleUpAfterMs: 3_000,
  scaleDownAfterMs: 60_000,
};

describe('ServeModelWorkflow scaling', () => {
  it('applies a decision made against the count in force, drops stale ones, and keeps the count through an update', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => (d.spec.scaling = SCALING));
      const handle = await start(doc, QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.scaling).toEqual({
        replicas: 1,
        minReplicas: 1,
        maxReplicas: 4,
        targetConcurrency: 2,
        decisions: 0,
      });
      expect(stub.callsOf('applyEngine')[0]!.input).toMatchObject({ replicas: 1, scaling: POLICY });

      await handle.signal(scaleSignal, { replicas: 3, from: 1, reason: 'load 5 over target 2 held 3s' });
      const out = await waitForStatus(handle, (s) => s.scaling?.replicas === 3);
      expect(stub.callsOf('scaleEngine').map((c) => c.input.replicas)).toEqual([3]);
      expect(out.replicas).toBe(3);
      expect(out.scaling?.lastDecision).toMatchObject({ from: 1, to: 3, reason: 'load 5 over target 2 held 3s' });
      expect(out.timeline.filter((e) => e.step === 'scale').map((e) => e.detail)).toEqual([
        '1 → 3 replicas: load 5 over target 2 held 3s',
      ]);

      // A look puts back the count in force, and the policy.
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').some((c) => c.outcome === 'returned'));
      expect(stub.callsOf('lookAtModel')[0]!.input).toMatchObject({ replicas: 3, scaling: POLICY });

      // A duplicate (made against 1 again), one beyond maxReplicas: dropped, nothing called.
      await handle.signal(scaleSignal, { replicas: 3, from: 1, reason: 'again' });
      await handle.signal(scaleSignal, { replicas: 9, from: 3, reason: 'too many' });
      // An update: rolled out at the count in force, which every look carries too.
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const updated = await waitForStatus(handle, readyAt(2));
      expect(stub.callsOf('scaleEngine')).toHaveLength(1);
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ replicas: 3, scaling: POLICY });
      expect(updated.scaling).toMatchObject({ replicas: 3, decisions: 1 });

      // Down, then scaling removed: the spec's replicas again.
      await handle.signal(scaleSignal, { replicas: 2, from: 3, reason: 'quiet for 1m' });
      await waitForStatus(handle, (s) => s.scaling?.replicas === 2);
      delete doc.spec.scaling;
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const fixed: ModelStatus = await waitForStatus(handle, readyAt(3));
      expect(fixed.scaling).toBeUndefined();
      expect(fixed.replicas).toBe(1);
      const last = stub.callsOf('applyEngine').at(-1)!.input;
      expect(last.replicas).toBeUndefined();
      expect(last.scaling).toBeUndefined();
      // A decision for a model that no longer scales: dropped. The look the wake after it brings shows it was read.
      const looks = stub.callsOf('lookAtModel').length;
      await handle.signal(scaleSignal, { replicas: 2, from: 1, reason: 'no scaling any more' });
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').length > looks);
      expect(stub.callsOf('scaleEngine')).toHaveLength(2);
      expect(stub.callsOf('lookAtModel').at(-1)!.input.replicas).toBeUndefined();
    });
  });

  it('takes the target from the measured baseline, and applies the engine again with it', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => {
        d.spec.scaling = { minReplicas: 2, maxReplicas: 3 };
        d.spec.slo = { ttft: '2s', itl: '100ms' };
      });
      const handle = await start(doc, QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      // The stub measures 8 at once: the target is 0.8 × 8.
      expect(ready.scaling).toMatchObject({ replicas: 2, targetConcurrency: 6.4 });
      const applies = stub.callsOf('applyEngine').map((c) => c.input);
      expect(applies).toHaveLength(2);
      expect(applies[0]).toMatchObject({ replicas: 2 });
      expect(applies[0]!.scaling).toBeUndefined();
      expect(applies[1]).toMatchObject({ replicas: 2, scaling: { targetConcurrency: 6.4 } });
    });
  });

  it('goes to zero on a decision (Idle, 0 in every look), and wakes on the next: Starting until /health, then Ready', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => {
        d.spec.scaling = { ...SCALING, idleToZeroAfter: '30m' };
        d.spec.front = {};
      });
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, readyAt(1));
      expect(stub.callsOf('applyEngine')[0]!.input).toMatchObject({
        replicas: 1,
        scaling: { ...POLICY, idleToZeroAfterMs: 1_800_000 },
      });

      await handle.signal(scaleSignal, { replicas: 0, from: 1, reason: 'no request for 30m 00s' });
      const idle = await waitForStatus(handle, (s) => s.phase === 'Idle');
      expect(idle).toMatchObject({
        replicas: 0,
        readyReplicas: 0,
        scaling: { replicas: 0, idleSince: idle.scaling?.lastDecision?.at, decisions: 1 },
      });
      expect(idle.scaling?.idleSince).toBeDefined();
      expect(idle.conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Idle' });
      expect(stub.callsOf('scaleEngine').map((c) => c.input.replicas)).toEqual([0]);

      // A look at the Idle model keeps 0 in force and leaves it Idle.
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').some((c) => c.outcome === 'returned'));
      expect(stub.callsOf('lookAtModel').at(-1)!.input).toMatchObject({ replicas: 0 });
      expect((await waitForStatus(handle, () => true)).phase).toBe('Idle');
      // An update while Idle: applied at 0, Idle again at its generation.
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.phase === 'Idle' && s.observedGeneration === 2);
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ replicas: 0 });

      // The wake: Starting while the replica starts, Ready once it answers /health.
      const health = stub.gate('awaitHealth');
      await handle.signal(scaleSignal, { replicas: 1, from: 0, reason: 'a request held at zero: 0 → 1 at once' });
      await health.reached;
      const starting = await waitForStatus(handle, (s) => s.phase === 'Starting');
      expect(starting.replicas).toBe(1);
      expect(starting.scaling?.idleSince).toBeUndefined();
      health.release();
      const awake = await waitForStatus(handle, (s) => s.phase === 'Ready');
      expect(stub.callsOf('scaleEngine').map((c) => c.input.replicas)).toEqual([0, 1]);
      expect(awake).toMatchObject({ replicas: 1, observedGeneration: 2, scaling: { replicas: 1, decisions: 2 } });
      const steps = awake.timeline.filter((e) => e.step === 'scale' || e.step === 'startup');
      expect(steps.map((e) => `${e.step} ${e.outcome}`)).toEqual([
        'startup Succeeded',
        'scale Succeeded',
        'startup Skipped',
        'scale Succeeded',
        'startup Succeeded',
      ]);
      // A decision to 0 for a model without idleToZeroAfter is dropped.
      delete doc.spec.scaling!.idleToZeroAfter;
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(3));
      expect(stub.callsOf('applyEngine').at(-1)!.input.scaling).toEqual(POLICY);
      const looks = stub.callsOf('lookAtModel').length;
      await handle.signal(scaleSignal, { replicas: 0, from: 1, reason: 'no idleToZeroAfter any more' });
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').length > looks);
      expect(stub.callsOf('scaleEngine')).toHaveLength(2);
    });
  });
});
