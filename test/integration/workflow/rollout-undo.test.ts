// `ferry rollout undo` and `abort --keep-weights` (docs/design/rollout.md) on a real Temporal server: an undo returns a
// Ready model to the revision before, under its own name, from the weights its kept volume holds, with no gate, and
// keeps the revision it left in its place; refused when there is nothing to return to. An abort with keepWeights
// leaves the candidate's volume; an abort during the candidate's download cancels the pull.
import { describe, expect, it } from 'vitest';
import {
  rolloutActionUpdate,
  specQuery,
  updateModelUpdate,
  type RolloutActionInput,
} from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { blockUntilCancelled, StubActivities } from '../../support/stub-activities.js';
import {
  modelDoc,
  readyAt,
  refusal,
  waitForStatus,
  withWorker,
  type Doc,
  type ModelHandle,
  ROLLOUT_OPTIONS,
} from '../../support/workflow-harness.js';

const harness = useHarness();

const canary =
  (steps: { traffic: number; gate?: string }[], keepRevisions = 1) =>
  (d: Doc) => {
    d.spec.front = {};
    d.spec.rollout = { strategy: 'Canary', steps, keepRevisions };
  };

/** Why the workflow refused a rollout action, in its words. */
const refused = (handle: ModelHandle, input: RolloutActionInput) =>
  refusal(handle.executeUpdate(rolloutActionUpdate, { args: [input] }));

const sharesOf = (stub: StubActivities) =>
  stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((s) => `${s.revision}:${s.weight}`));

describe('ServeModelWorkflow rollout undo and abort', () => {
  it('returns to the revision before from its kept weights, with no gate, and can return again', async () => {
    const stub = new StubActivities();
    // A kept volume holds its weights, as the real applyStorage finds from the volume's annotation.
    const holding = new Map<string, boolean>();
    stub.on('applyStorage', async (input) => ({
      pvcName: `${input.model.metadata.name}${input.slot === 'b' ? '-b' : ''}-weights`,
      phase: 'Bound',
      holdsSource: holding.get(input.slot ?? 'a') ?? false,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 50, gate: '1h' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      // Nothing to return to yet.
      expect(await refused(handle, { action: 'undo' })).toMatch(
        /^NoRolloutWaiting: .* keeps no revision before r1 to return to/,
      );

      doc.spec.source.huggingface.revision = 'v2';
      doc.spec.engine.args = ['--enforce-eager'];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.traffic === 50);
      // During a rollout the way back is an abort.
      expect(await refused(handle, { action: 'undo' })).toMatch(/is rolling r2 out: ferry rollout abort returns/);
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort' }] });
      await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      doc.spec.rollout.steps = [{ traffic: 50, gate: '1s' }];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.revision === 'r3' && s.rollout.state === 'Promoted');
      const pulls = stub.callsOf('startPuller').length;
      const shifts = sharesOf(stub).length;

      expect(await refused(handle, { action: 'undo', revision: 'r2' })).toMatch(/the revision before is r1, not r2$/);
      holding.set('a', true);
      const undo = await handle.executeUpdate(rolloutActionUpdate, {
        args: [{ action: 'undo', revision: 'r1', reason: 'r3 answers worse', requestedBy: 'carol' }],
      });
      expect(undo).toEqual({ revision: 'r1', action: 'undo', generation: 4 });
      const back = await waitForStatus(handle, readyAt(4));
      expect(back).toMatchObject({
        revision: 'r1',
        source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
        rollout: { revision: 'r1', from: 'r3', undo: true, strategy: 'BlueGreen', state: 'Promoted', steps: 1 },
        revisions: [
          { name: 'r1', role: 'current', slot: 'a', weight: 100 },
          { name: 'r3', role: 'previous', slot: 'b', weight: 0 },
        ],
      });
      expect(back.rollout!.gates).toEqual([]);
      expect(back.timeline.filter((e) => e.step === 'update').at(-1)!.detail).toMatch(
        /^generation 4: undo to r1, asked by carol: r3 answers worse$/,
      );
      // The kept weights, not a pull; the front straight from r3 to r1, with no step between.
      expect(stub.callsOf('startPuller')).toHaveLength(pulls);
      expect(sharesOf(stub).slice(shifts)).toEqual([['r1:100']]);
      expect(stub.callsOf('applyEngine').at(-1)!.input.model.spec.engine.args).toEqual([]);
      // The spec in force is r1's weights and pods, with the rest as it is now.
      const spec = await handle.query(specQuery);
      expect(spec.spec).toMatchObject({ source: { huggingface: { revision: 'main' } }, engine: { args: [] } });
      expect(spec.spec.rollout?.steps).toEqual([{ traffic: 50, gate: '1s' }]);

      // And back again to r3, which the undo kept.
      holding.set('b', true);
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'undo' }] });
      const again = await waitForStatus(handle, readyAt(5));
      expect(again).toMatchObject({ revision: 'r3', rollout: { revision: 'r3', from: 'r1', undo: true } });
      expect((await handle.query(specQuery)).spec.engine.args).toEqual(['--enforce-eager']);
      expect(stub.callsOf('startPuller')).toHaveLength(pulls);
      // A new revision after the undos takes the next number.
      doc.spec.source.huggingface.revision = 'v4';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      expect(await waitForStatus(handle, readyAt(6))).toMatchObject({ revision: 'r4' });
    });
  });

  it('refuses an undo when no revision before is kept (keepRevisions 0)', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 50, gate: '1s' }], 0));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      expect(stub.callsOf('retireRevision').map((c) => c.input.keepVolume)).toEqual([false]);
      expect(await refused(handle, { action: 'undo' })).toMatch(/keeps no revision before r2 to return to/);
      expect(await refused(handle, { action: 'approve', keepWeights: true })).toMatch(
        /^InvalidInput: keepWeights is for an abort, not an approve$/,
      );
    });
  });

  it("keeps an aborted candidate's volume on abort with keepWeights", async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 25, gate: '1h' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.traffic === 25);
      await handle.executeUpdate(rolloutActionUpdate, {
        args: [{ action: 'abort', keepWeights: true, reason: 'look at its files' }],
      });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      expect(back).toMatchObject({
        revision: 'r1',
        rollout: { message: 'aborted (its weights kept): look at its files' },
      });
      expect(stub.callsOf('retireRevision').map((c) => [c.input.slot, c.input.keepVolume])).toEqual([['b', true]]);
    });
  });

  it("aborts during the candidate's download: the pull cancelled, its puller and volume taken away, r1 serving on", async () => {
    const stub = new StubActivities();
    stub.on('awaitPuller', async (input) =>
      input.slot === 'b' ? blockUntilCancelled() : { jobName: input.jobName, durationMs: 1_000 },
    );
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canary([{ traffic: 25, gate: '1s' }]));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, () => stub.callsOf('awaitPuller').some((c) => c.input.slot === 'b'));
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort', reason: 'wrong checkpoint' }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      expect(back).toMatchObject({
        revision: 'r1',
        source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
        rollout: { revision: 'r2', step: 0, traffic: 0, message: 'aborted: wrong checkpoint' },
      });
      expect(stub.callsOf('awaitPuller').find((c) => c.input.slot === 'b')!.outcome).toBe('cancelled');
      // Nothing had been shifted: the front straight back to r1 alone; slot b's puller and volume deleted.
      expect(sharesOf(stub)).toEqual([['r1:100']]);
      expect(stub.callsOf('retireRevision').map((c) => [c.input.slot, c.input.keepVolume])).toEqual([['b', false]]);
      expect(back.timeline.filter((e) => e.step === 'download').map((e) => e.outcome)).toEqual([
        'Succeeded',
        'Cancelled',
      ]);
    });
  });
});
