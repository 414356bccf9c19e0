// A new revision rolled out beside the one that serves (spec.rollout; docs/design/rollout.md), as the workflow sees it:
// the candidate's volume, pull, engine and health in the other slot, the front at each step's share, the revision
// before taken away with its volume kept, and every later activity in the candidate's slot; a candidate that fails sends
// every request back, is taken away, and leaves the model Ready on the revision before with its spec in force.
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import {
  FAILURE,
  modelChangedSignal,
  rolloutActionUpdate,
  specQuery,
  updateModelUpdate,
  waitOutcome,
} from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import {
  modelDoc,
  readyAt,
  refusal,
  waitForStatus,
  withWorker,
  ROLLOUT_OPTIONS,
  type Doc,
} from '../../support/workflow-harness.js';

const harness = useHarness();

const canary = (steps: { traffic: number; gate?: string; timeout?: string }[]) => (d: Doc) => {
  d.spec.front = {};
  d.spec.rollout = { strategy: 'Canary', steps };
};

describe('ServeModelWorkflow rollout', () => {
  it('rolls a new source out beside the current one, step by step, and keeps the revision before for an undo', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 10 }, { traffic: 50, gate: '1s' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const first = await waitForStatus(handle, readyAt(1));
      expect(first).toMatchObject({ revision: 'r1' });
      expect(stub.callsOf('applyEngine')[0]!.input).toMatchObject({
        shares: [{ revision: 'r1', slot: 'a', weight: 100 }],
      });

      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const done = await waitForStatus(handle, readyAt(2));
      expect(done).toMatchObject({
        phase: 'Ready',
        revision: 'r2',
        source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@v2',
        rollout: { revision: 'r2', from: 'r1', strategy: 'Canary', state: 'Promoted', step: 2, steps: 3, traffic: 100 },
        revisions: [
          { name: 'r2', role: 'current', slot: 'b', weight: 100 },
          { name: 'r1', role: 'previous', slot: 'a', weight: 0 },
        ],
      });
      // The status names the new weights, as a first start would.
      expect(done.sourceHash).toMatch(/^[0-9a-f]{64}$/);
      expect(done.sourceHash).not.toBe(first.sourceHash);
      expect(done.rollout!.gates.map((g) => [g.step, g.gate, g.result])).toEqual([
        [1, 'health', 'Passed'],
        [2, '1s', 'Passed'],
      ]);
      // The candidate's objects in slot b; the current one's untouched until it is taken away.
      expect(stub.callsOf('applyStorage').map((c) => c.input.slot)).toEqual([undefined, 'b']);
      expect(stub.callsOf('startPuller').at(-1)!.input.slot).toBe('b');
      expect(stub.callsOf('awaitHealth').at(-1)!.input.slot).toBe('b');
      expect(
        stub
          .callsOf('applyEngine')
          .slice(1)
          .map((c) => [c.input.slot, c.input.shares]),
      ).toEqual([
        ['b', [{ revision: 'r1', slot: 'a', weight: 100 }]],
        ['b', [{ revision: 'r2', slot: 'b', weight: 100 }]],
      ]);
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((s) => `${s.revision}:${s.weight}`))).toEqual([
        ['r1:90', 'r2:10'],
        ['r1:50', 'r2:50'],
        ['r2:100'],
      ]);
      expect(stub.callsOf('retireRevision').map((c) => [c.input.slot, c.input.keepVolume])).toEqual([['a', true]]);
      expect(stub.callsOf('scaleEngine')).toHaveLength(0);

      // From now on the engine is slot b's: a look keeps it there, the front on r2 alone.
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').some((c) => c.outcome === 'returned'));
      expect(stub.callsOf('lookAtModel').at(-1)!.input).toMatchObject({
        slot: 'b',
        shares: [{ revision: 'r2', slot: 'b', weight: 100 }],
      });

      // The next revision (new engine arguments) goes into slot a, and slot b is taken away.
      doc.spec.engine.args = ['--enforce-eager'];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const third = await waitForStatus(handle, readyAt(3));
      expect(third).toMatchObject({ revision: 'r3', rollout: { from: 'r2', state: 'Promoted' } });
      expect(third.revisions?.map((r) => [r.name, r.role, r.slot])).toEqual([
        ['r3', 'current', 'a'],
        ['r2', 'previous', 'b'],
      ]);
      expect(stub.callsOf('applyEngine').at(-1)!.input.slot).toBeUndefined();
      expect(stub.callsOf('retireRevision').at(-1)!.input).toMatchObject({ slot: 'b', keepVolume: true });

      // An update that is not a new revision applies in place, in the current slot.
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(4));
      expect(stub.callsOf('shiftTraffic')).toHaveLength(6);
    });
  });

  it('rolls a candidate that fails back: every request to the revision before, the candidate taken away', async () => {
    const stub = new StubActivities();
    stub.on('readStatus', async (input) =>
      input.slot === 'b'
        ? { replicas: 1, readyReplicas: 0, problem: { reason: 'CrashLoopBackOff', message: 'vllm exited 1' } }
        : { replicas: 1, readyReplicas: 1 },
    );
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 20 }, { traffic: 60 }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      const before = structuredClone(doc);
      doc.spec.source.huggingface.revision = 'broken';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back).toMatchObject({
        phase: 'Ready',
        generation: 2,
        observedGeneration: 2,
        revision: 'r1',
        source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
        rollout: { revision: 'r2', state: 'Aborted', step: 1, traffic: 0 },
        revisions: [{ name: 'r1', role: 'current', slot: 'a', weight: 100 }],
      });
      expect(back.rollout!.message).toMatch(/^step 1 \(20%\): gate health: CrashLoopBackOff: vllm exited 1$/);
      expect(back.conditions.find((c) => c.type === 'Ready')).toMatchObject({
        status: 'True',
        reason: 'RolloutAborted',
      });
      // Whoever waited for Ready at generation 2 is told it failed.
      expect(waitOutcome(back, ['Ready'], 2)).toBe('failed');
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((s) => `${s.revision}:${s.weight}`))).toEqual([
        ['r1:80', 'r2:20'],
        ['r1:100'],
      ]);
      expect(stub.callsOf('retireRevision').map((c) => [c.input.slot, c.input.keepVolume])).toEqual([['b', false]]);
      // The spec in force is the revision before's: the look keeps it, and the same document again tries again.
      expect((await handle.query(specQuery)).spec.source).toEqual(before.spec.source);
      expect(back.timeline.filter((e) => e.step === 'update').at(-1)).toMatchObject({ outcome: 'Failed' });
    });
  });

  it('rolls back a candidate that never starts: nothing was shifted to it', async () => {
    const stub = new StubActivities();
    stub.on('awaitHealth', async (input) => {
      if (input.slot === 'b')
        throw ApplicationFailure.create({
          type: FAILURE.StartupTimeout,
          message: 'no answer in 1m',
          nonRetryable: true,
        });
      return { endpoint: 'http://x', models: ['x'] };
    });
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => {
        canary([{ traffic: 50 }])(d);
        d.spec.rollout.strategy = 'BlueGreen';
        d.spec.rollout.steps = [];
      });
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back.rollout).toMatchObject({ strategy: 'BlueGreen', step: 0 });
      expect(back.lastError).toMatchObject({ reason: FAILURE.StartupTimeout, step: 'startup' });
      // Nothing was shifted to it: the front went straight back to r1 alone.
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares)).toEqual([
        [{ revision: 'r1', slot: 'a', weight: 100 }],
      ]);
    });
  });

  it('takes a candidate away when an update cuts its rollout short, then rolls the newer revision out', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 30, gate: '1h' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.traffic === 30);
      // An hour's pause at 30 %: another checkpoint comes meanwhile.
      doc.spec.source.huggingface.revision = 'v3';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const next = await waitForStatus(handle, (s) => s.rollout?.revision === 'r3' && s.rollout.traffic === 30);
      expect(next.rollout).toMatchObject({ from: 'r1', state: 'Progressing', generation: 3 });
      // r3 goes into the same slot r2 was taken from.
      expect(stub.callsOf('applyEngine').at(-1)!.input.slot).toBe('b');
      // Back to the revision it was cut from, without a rollout: the candidate goes, and nothing says it still rolls out.
      doc.spec.source.huggingface.revision = 'main';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const home = await waitForStatus(handle, readyAt(4));
      expect(home.rollout).toMatchObject({ revision: 'r3', state: 'Aborted', message: 'cut short by generation 4' });
      expect(home.revisions).toMatchObject([{ name: 'r1', role: 'current', slot: 'a', weight: 100 }]);
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((x) => `${x.revision}:${x.weight}`))).toEqual([
        ['r1:70', 'r2:30'],
        ['r1:100'],
        ['r1:70', 'r3:30'],
        ['r1:100'],
      ]);
      expect(stub.callsOf('retireRevision').map((c) => [c.input.slot, c.input.keepVolume])).toEqual([
        ['b', false],
        ['b', false],
      ]);
    });
  });

  it('waits at an approval gate for `ferry rollout approve`, refusing a word for another candidate; its timeout aborts', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 20, gate: 'approval', timeout: '1h' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      // No rollout under way: nothing to approve or abort.
      expect(await refusal(handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort' }] }))).toMatch(
        /has no rollout under way/,
      );
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const waiting = await waitForStatus(handle, (s) => s.rollout?.awaiting !== undefined);
      expect(waiting.rollout).toMatchObject({
        step: 1,
        traffic: 20,
        awaiting: { gate: 'approval', onTimeout: 'abort' },
      });
      expect(
        await refusal(handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'approve', revision: 'r7' }] })),
      ).toMatch(/^NoRolloutWaiting: .* is rolling out r2, not r7$/);
      const approved = await handle.executeUpdate(rolloutActionUpdate, {
        args: [{ action: 'approve', revision: 'r2', reason: 'eval ok', requestedBy: 'alice' }],
      });
      expect(approved).toEqual({ revision: 'r2', action: 'approve' });
      const done = await waitForStatus(handle, readyAt(2));
      expect(done.rollout).toMatchObject({ state: 'Promoted' });
      expect(done.rollout!.awaiting).toBeUndefined();
      expect(done.rollout!.gates).toMatchObject([
        { gate: 'approval', result: 'Passed', message: 'approved by alice: eval ok' },
      ]);

      // The next one waits a second for an approval that does not come: rolled back.
      doc.spec.rollout.steps = [{ traffic: 20, gate: 'approval', timeout: '1s' }];
      doc.spec.source.huggingface.revision = 'v3';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const timedOut = await waitForStatus(
        handle,
        (s) => s.rollout?.revision === 'r3' && s.rollout.state === 'Aborted',
      );
      expect(timedOut).toMatchObject({ phase: 'Ready', revision: 'r2' });
      expect(timedOut.rollout!.message).toMatch(/gate approval: no approval within 1s \(onTimeout abort\)$/);
    });
  });

  it('aborts a rollout at any step on `ferry rollout abort`: every request back, the candidate taken away', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 25, gate: '1h' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.traffic === 25);
      expect(await refusal(handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'approve' }] }))).toMatch(
        /not waiting for an approval/,
      );
      await handle.executeUpdate(rolloutActionUpdate, {
        args: [{ action: 'abort', reason: 'p99 doubled', requestedBy: 'bob' }],
      });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      expect(back).toMatchObject({ revision: 'r1', rollout: { message: 'aborted by bob: p99 doubled', traffic: 0 } });
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((x) => `${x.revision}:${x.weight}`))).toEqual([
        ['r1:75', 'r2:25'],
        ['r1:100'],
      ]);
      expect(stub.callsOf('retireRevision').map((c) => c.input.slot)).toEqual(['b']);
      expect(waitOutcome(back, ['Ready'], 2)).toBe('failed');
    });
  });

  it('rolls back a candidate that the front counts failing more of its requests than the current revision', async () => {
    const stub = new StubActivities();
    stub.on('readStatus', async (input) => ({
      replicas: 1,
      readyReplicas: 1,
      ...(input.frontCounters
        ? {
            front: {
              pods: 2,
              revisions: {
                r1: { requests: 90, answered: 90, failed: 0, averageMs: 100 },
                r2: { requests: 10, answered: 8, failed: 4, averageMs: 110 },
              },
            },
          }
        : {}),
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 10 }, { traffic: 50 }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back).toMatchObject({ revision: 'r1', rollout: { step: 1, traffic: 0 } });
      expect(back.rollout!.message).toBe(
        "step 1 (10%): gate health: more than 1 % of r2's requests failed, through the front r2: 4 of 10 requests failed (40 %), 110 ms on average; r1: 0 of 90 requests failed (0 %), 100 ms on average",
      );
      expect(stub.callsOf('readStatus').at(-1)!.input).toMatchObject({ slot: 'b', frontCounters: true });
    });
  });
});
