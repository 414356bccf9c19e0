// Serving from a trigger in another team's workflow: "training finished" → applyServedModel (Update-with-Start from
// the createServingActivities activity). The same event delivered twice serves once; a new checkpoint updates.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { createServingActivities } from '../../../client/index.js';
import { statusQuery, workflowIdFor } from '../../../workflows/contract/index.js';
import { eventually } from '../../support/ferry-worker.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import { withWorker, type ModelHandle } from '../../support/workflow-harness.js';
import { onTrainingFinished, type TrainingFinished } from './fixtures/trigger.js';

const harness = useHarness(join(import.meta.dirname, 'fixtures', 'trigger.ts'));

it('serves once for a "training finished" event delivered twice, and updates for the next checkpoint', async () => {
  const stub = new StubActivities();
  const serving = createServingActivities(harness.client);
  await withWorker(
    harness,
    stub,
    async ({ client, taskQueue }) => {
      const run = `run-${randomBytes(3).toString('hex')}`;
      const cluster = taskQueue.replace(/^ferry-/, '');
      const event: TrainingFinished = { run, checkpoint: 'step-1000', cluster };
      const deliver = (e: TrainingFinished, delivery: number) =>
        client.workflow.execute(onTrainingFinished, {
          taskQueue,
          workflowId: `trained-${run}-${e.checkpoint}-${delivery}`,
          args: [e],
        });

      const first = await deliver(event, 1);
      const again = await deliver(event, 2);
      // The start carries the spec, so the update that rides with it changes nothing: generation 1 either way.
      expect(first).toMatchObject({ started: true, generation: 1 });
      expect(again).toMatchObject({ started: false, changed: false, generation: 1, runId: first.runId });

      const model: ModelHandle = client.workflow.getHandle(
        workflowIdFor({ cluster, namespace: 'models', name: `${run}-latest` }),
      );
      await eventually(
        () => model.query(statusQuery),
        (s) => s.phase === 'Ready',
      );
      expect(stub.callsOf('startPuller')).toHaveLength(1);

      const next = await deliver({ ...event, checkpoint: 'step-2000' }, 1);
      expect(next).toMatchObject({ started: false, changed: true, sourceChanged: true, generation: 2 });
      const ready = await eventually(
        () => model.query(statusQuery),
        (s) => s.phase === 'Ready' && s.observedGeneration === 2,
      );
      expect(ready.source).toBe(`pvc:checkpoints/${run}/step-2000`);
      expect(stub.callsOf('startPuller')).toHaveLength(2);
      await model.terminate('test finished');
    },
    serving,
  );
});

it("rolls each new checkpoint out as a canary that the team's evaluation gates, once per checkpoint", async () => {
  const stub = new StubActivities();
  const serving = createServingActivities(harness.client);
  await withWorker(
    harness,
    stub,
    async ({ client, taskQueue }) => {
      const run = `run-${randomBytes(3).toString('hex')}`;
      const cluster = taskQueue.replace(/^ferry-/, '');
      const event: TrainingFinished = { run, checkpoint: 'step-1000', cluster, canaryEvaluatedOn: taskQueue };
      const deliver = (e: TrainingFinished, delivery: number) =>
        client.workflow.execute(onTrainingFinished, {
          taskQueue,
          workflowId: `trained-${run}-${e.checkpoint}-${delivery}`,
          args: [e],
        });
      const model: ModelHandle = client.workflow.getHandle(
        workflowIdFor({ cluster, namespace: 'models', name: `${run}-latest` }),
      );
      const settled = (generation: number) =>
        eventually(
          () => model.query(statusQuery),
          (s) => s.observedGeneration === generation && s.phase === 'Ready' && s.rollout?.state !== 'Progressing',
        );
      await deliver(event, 1);
      await settled(1);

      // step-2000 passes the evaluation and takes every request; delivered again, it changes nothing.
      expect(await deliver({ ...event, checkpoint: 'step-2000' }, 1)).toMatchObject({ changed: true, generation: 2 });
      const promoted = await settled(2);
      expect(promoted).toMatchObject({
        revision: 'r2',
        source: `pvc:checkpoints/${run}/step-2000`,
        rollout: { state: 'Promoted', gates: [{ gate: 'evaluation', result: 'Passed' }] },
      });
      expect(await deliver({ ...event, checkpoint: 'step-2000' }, 2)).toMatchObject({ changed: false, generation: 2 });
      expect(stub.callsOf('startPuller')).toHaveLength(2);

      // An older checkpoint delivered late fails the evaluation: rolled back, step-2000 serves on.
      expect(await deliver({ ...event, checkpoint: 'step-1500' }, 1)).toMatchObject({ changed: true, generation: 3 });
      const back = await settled(3);
      expect(back).toMatchObject({
        revision: 'r2',
        source: `pvc:checkpoints/${run}/step-2000`,
        rollout: { revision: 'r3', state: 'Aborted' },
      });
      expect(back.rollout!.gates.at(-1)!.message).toMatch(/step-1500 at step 1500 on /);
      await model.terminate('test finished');
    },
    serving,
  );
});
