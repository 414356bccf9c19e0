// Records the PlaceModelWorkflow histories that test/integration/workflow/replay.test.ts replays, from real runs on the
// local dev server: two workers stand for two clusters (task queues ferry-replay-west and ferry-replay-east), each with
// stub activities whose `clusterCapacity` reports one node; a third listed cluster has no worker. Rerun after a
// deliberate change of the placement's commands, committing new histories next to the old ones (record.ts says why):
//
//   npm run local:up -- temporal && npx tsx test/histories/record-place.ts
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { NoCapacityError, serveModel } from '../../client/index.js';
import { placeWorkflowIdFor, taskQueueFor, workflowIdFor } from '../../workflows/contract/index.js';
import { recordOn, saveHistory } from '../support/history-files.js';
import { StubActivities } from '../support/stub-activities.js';
import { modelDoc, startHarness, TEST_SINKS } from '../support/workflow-harness.js';

const here = import.meta.dirname;
const [west, east, nowhere] = ['replay-west', 'replay-east', 'replay-nowhere'];
const namespace = 'replay';

const harness = await startHarness();
const { client } = harness;
/** A cluster's worker whose one GPU node has `free` of its 8 GPUs free. */
const stubWith = (free: number) =>
  new StubActivities().on('clusterCapacity', () =>
    Promise.resolve({ nodes: [{ name: 'gpu-0', allocatable: 8, free }] }),
  );
const workers = await Promise.all(
  [
    [west, stubWith(1)],
    [east, stubWith(6)],
  ].map(([cluster, stub]) =>
    Worker.create({
      connection: harness.connection,
      taskQueue: taskQueueFor(cluster as string),
      workflowBundle: harness.bundle,
      activities: (stub as StubActivities).activities(),
      sinks: TEST_SINKS,
      shutdownGraceTime: '200ms',
    }),
  ),
);

const placedDoc = (name: string, gpus: number) =>
  modelDoc((d) => {
    d.metadata.namespace = namespace;
    delete d.spec.cluster;
    d.spec.placement = { clusters: [west, nowhere, east] };
    d.spec.resources = { gpus };
  }, name);

const save = (file: string, name: string) =>
  saveHistory(client.workflow.getHandle(placeWorkflowIdFor({ namespace, name })), join(here, file));

try {
  await recordOn(workers, async () => {
      // West has 1 GPU free, nowhere no worker, east 6: a 2-GPU model is placed on east.
      const placed = await serveModel(client, placedDoc('replay-placed', 2));
      if (placed.placement?.cluster !== east) throw new Error(`placed on ${placed.placement?.cluster}, not ${east}`);
      await save('placed-passed-over-chosen.json', 'replay-placed');
      await client.workflow
        .getHandle(workflowIdFor(placed.ref))
        .terminate('recorded')
        .catch(() => undefined);

      // An 8-GPU model fits nowhere: NoCapacity.
      const refused = await serveModel(client, placedDoc('replay-no-room', 8)).catch((err: unknown) => err);
      if (!(refused instanceof NoCapacityError)) throw new Error(`expected NoCapacity, got ${String(refused)}`);
      await save('placed-no-capacity.json', 'replay-no-room');
  });
} finally {
  await harness.close();
}
