// A rollout's evaluation gate (spec.rollout.evaluation; docs/design/rollout.md) on a real Temporal server: the team's
// workflow runs as a child on its own task queue, given the candidate's own endpoint while the candidate takes the
// step's share; its verdict promotes the candidate or rolls it back, and so do its failure, its timeout and an abort.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { rolloutActionUpdate, updateModelUpdate, type ModelStatus } from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import {
  modelDoc,
  readyAt,
  waitForStatus,
  withWorker,
  ROLLOUT_OPTIONS,
  type Doc,
} from '../../support/workflow-harness.js';

const harness = useHarness(join(import.meta.dirname, 'fixtures', 'evaluate-candidate.ts'));

/** A Canary at 10 % (health), then 50 % held by the team's `workflow` on `taskQueue`. */
const evaluated = (workflow: string, taskQueue: string, timeout?: string) => (d: Doc) => {
  d.spec.front = {};
  d.spec.rollout = {
    strategy: 'Canary',
    steps: [{ traffic: 10 }, { traffic: 50, gate: 'evaluation' }],
    evaluation: { workflow, taskQueue, ...(timeout ? { timeout } : {}) },
  };
};

const engineAt = (slot: string | undefined) => `http://engine-${slot ?? 'a'}.test:8000/v1`;

/** A stub whose health answers name the slot's own engine behind the front, as the real activity does. */
function frontedStub(): StubActivities {
  const stub = new StubActivities();
  stub.on('awaitHealth', async (input) => ({
    endpoint: 'http://front.test:8000/v1',
    engineEndpoint: engineAt(input.slot),
    models: [input.model.spec.engine.servedModelName],
  }));
  return stub;
}

/** Rolls `doc` out again with a new source; returns the status once the rollout has ended. */
async function rollOutV2(
  handle: Awaited<ReturnType<Parameters<Parameters<typeof withWorker>[2]>[0]['start']>>,
  doc: Doc,
): Promise<ModelStatus> {
  await waitForStatus(handle, readyAt(1));
  doc.spec.source.huggingface.revision = 'v2';
  await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
  return await waitForStatus(handle, (s) => s.rollout?.state === 'Promoted' || s.rollout?.state === 'Aborted');
}

describe('ServeModelWorkflow rollout with an evaluation gate', () => {
  it("promotes a candidate the team's workflow passes, which it evaluated on the candidate's own endpoint", async () => {
    const stub = frontedStub();
    await withWorker(harness, stub, async ({ start, client, taskQueue }) => {
      const doc = modelDoc(evaluated('passingEvaluation', taskQueue));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const done = await rollOutV2(handle, doc);
      expect(done).toMatchObject({ phase: 'Ready', revision: 'r2', rollout: { state: 'Promoted', traffic: 100 } });
      expect(done.rollout!.evaluating).toBeUndefined();
      const gate = done.rollout!.gates.find((g) => g.gate === 'evaluation');
      expect(gate).toMatchObject({ step: 2, result: 'Passed' });
      expect(gate!.message).toBe(
        `accuracy 0.93 on ${engineAt('b')} (r2 beside r1 at 50%, step 2, model endpoint http://front.test:8000/v1)`,
      );
      // The child ran on the team's task queue under an id that names the model's workflow, the candidate and the step.
      const child = await client.workflow.getHandle(`${handle.workflowId}/evaluate/r2/step-2`).describe();
      expect(child).toMatchObject({ type: 'passingEvaluation', taskQueue, status: { name: 'COMPLETED' } });
      expect(stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((s) => `${s.revision}:${s.weight}`))).toEqual([
        ['r1:90', 'r2:10'],
        ['r1:50', 'r2:50'],
        ['r2:100'],
      ]);
    });
  });

  it.each([
    { workflow: 'failingEvaluation', says: /^accuracy 0\.41 below 0\.9 on r2$/ },
    {
      workflow: 'throwingEvaluation',
      says: /^throwingEvaluation \S+\/evaluate\/r2\/step-2: the evaluation set is missing$/,
    },
  ])('rolls back a candidate that $workflow fails: every request to r1, the candidate taken away', async (c) => {
    const stub = frontedStub();
    await withWorker(harness, stub, async ({ start, taskQueue }) => {
      const doc = modelDoc(evaluated(c.workflow, taskQueue));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const back = await rollOutV2(handle, doc);
      expect(back).toMatchObject({
        phase: 'Ready',
        revision: 'r1',
        rollout: { revision: 'r2', state: 'Aborted', step: 2, traffic: 0 },
        revisions: [{ name: 'r1', role: 'current', slot: 'a', weight: 100 }],
      });
      const gate = back.rollout!.gates.find((g) => g.gate === 'evaluation')!;
      expect(gate.result).toBe('Failed');
      expect(gate.message).toMatch(c.says);
      expect(back.rollout!.message).toMatch(/^step 2 \(50%\): gate evaluation: /);
      expect(stub.callsOf('shiftTraffic').map((s) => s.input.shares.map((x) => `${x.revision}:${x.weight}`))).toEqual([
        ['r1:90', 'r2:10'],
        ['r1:50', 'r2:50'],
        ['r1:100'],
      ]);
      expect(stub.callsOf('retireRevision').map((s) => [s.input.slot, s.input.keepVolume])).toEqual([['b', false]]);
    });
  });

  it('fails the gate when the evaluation outlives its timeout', async () => {
    const stub = frontedStub();
    await withWorker(harness, stub, async ({ start, taskQueue }) => {
      const doc = modelDoc(evaluated('endlessEvaluation', taskQueue, '2s'));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const back = await rollOutV2(handle, doc);
      expect(back).toMatchObject({ revision: 'r1', rollout: { state: 'Aborted' } });
      expect(back.rollout!.gates.at(-1)).toMatchObject({ gate: 'evaluation', result: 'Failed' });
      expect(back.rollout!.gates.at(-1)!.message).toMatch(/timed out/i);
    });
  });

  it('shows the evaluation under way, and an abort cancels it and rolls back', async () => {
    const stub = frontedStub();
    await withWorker(harness, stub, async ({ start, client, taskQueue }) => {
      const doc = modelDoc(evaluated('endlessEvaluation', taskQueue));
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const under = await waitForStatus(handle, (s) => s.rollout?.evaluating !== undefined);
      const workflowId = `${handle.workflowId}/evaluate/r2/step-2`;
      expect(under.rollout).toMatchObject({
        state: 'Progressing',
        step: 2,
        traffic: 50,
        evaluating: { workflowId, workflowType: 'endlessEvaluation' },
      });
      const { since, until } = under.rollout!.evaluating!;
      expect(Date.parse(until) - Date.parse(since)).toBe(3_600_000);

      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort', reason: 'wrong checkpoint' }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back).toMatchObject({ revision: 'r1', rollout: { message: 'aborted: wrong checkpoint' } });
      expect(back.rollout!.evaluating).toBeUndefined();
      const child = client.workflow.getHandle(workflowId);
      await expect.poll(async () => (await child.describe()).status.name).toBe('CANCELLED');
    });
  });
});
