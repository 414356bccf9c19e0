// Records the MoveModelWorkflow histories that test/integration/workflow/replay.test.ts replays, from real runs on the
// local dev server: two workers stand for two clusters (task queues ferry-replay-west and ferry-replay-east), each with
// stub activities for the models it serves; the west one has the serving activities the move calls. Rerun after a
// deliberate change of the move's commands, committing new histories next to the old ones (record.ts says why):
//
//   npm run local:up -- temporal && npx tsx test/histories/record-move.ts
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { abortMove, applyModel, moveHandle, moveResult, moveStatus, startMove } from '../../client/index.js';
import { createServingActivities } from '../../client/serving-activities.js';
import { taskQueueFor, workflowIdFor, type ModelRef } from '../../workflows/contract/index.js';
import { activityInterceptors } from '../../worker/create-worker.js';
import { recordOn, saveHistory } from '../support/history-files.js';
import { blockUntilCancelled, StubActivities } from '../support/stub-activities.js';
import { modelDoc, startHarness, TEST_SINKS } from '../support/workflow-harness.js';

const here = import.meta.dirname;
const [west, east] = ['replay-west', 'replay-east'];
const namespace = 'replay';

const harness = await startHarness();
const { client } = harness;
// East's download of the model whose move is aborted never ends, so the abort comes while the move waits for Ready.
const eastStub: StubActivities = new StubActivities().on('awaitPuller', (input) =>
  eastStub.modelOf(input).metadata.name === 'replay-move-aborted'
    ? blockUntilCancelled()
    : eastStub.fallback('awaitPuller', input),
);
const workers = await Promise.all(
  [
    [west, { ...new StubActivities().activities(), ...createServingActivities(client) }],
    [east, eastStub.activities()],
  ].map(([cluster, activities]) =>
    Worker.create({
      connection: harness.connection,
      taskQueue: taskQueueFor(cluster as string),
      workflowBundle: harness.bundle,
      activities: activities as object,
      sinks: TEST_SINKS,
      interceptors: { activity: activityInterceptors() },
      maxHeartbeatThrottleInterval: '20ms',
      defaultHeartbeatThrottleInterval: '20ms',
      shutdownGraceTime: '200ms',
    }),
  ),
);

/** Serves `name` on west and waits until it is Ready there. */
async function serveOnWest(name: string): Promise<ModelRef> {
  const doc = modelDoc((d) => {
    d.metadata.namespace = namespace;
    d.spec.cluster = west;
  }, name);
  await applyModel(client, doc, { wait: true, timeoutMs: 60_000 });
  return { name, namespace, cluster: west };
}

const save = (file: string, ref: ModelRef) => saveHistory(moveHandle(client, ref), join(here, file));

try {
  await recordOn(workers, async () => {
      // Served on east, Ready there, then torn down on west.
      const moved = await serveOnWest('replay-move');
      await moveResult(await startMove(client, moved, east));
      await save('moved-served-ready-torn-down.json', moved);

      // Aborted while it waited for east to be Ready: east's model deleted, west's untouched.
      const aborted = await serveOnWest('replay-move-aborted');
      await startMove(client, aborted, east);
      while ((await moveStatus(client, aborted)).step !== 'ready') await new Promise((r) => setTimeout(r, 200));
      await abortMove(client, aborted);
      await save('move-aborted-while-waiting.json', aborted);
      // The models left running (east's moved one, west's kept one): nothing more to record of them.
      for (const ref of [moved, aborted]) {
        for (const cluster of [west, east]) {
          await client.workflow
            .getHandle(workflowIdFor({ ...ref, cluster }))
            .terminate('recorded')
            .catch(() => undefined);
        }
      }
  });
} finally {
  await harness.close();
}
