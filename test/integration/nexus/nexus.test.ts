// Ferry across Temporal namespaces: a caller workflow in a namespace of its own uses the `ferry.models.v1` Nexus
// service (an endpoint on the dev server targeting Ferry's worker in `default`) to ensure a model, read its status
// and delete it; a caller cancelled while it waits leaves the model as it was.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { msNumberToTs } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServingActivities } from '../../../client/index.js';
import { statusQuery, workflowIdFor, type ModelStatus } from '../../../workflows/contract/index.js';
import { ferryModelsHandler } from '../../../worker/nexus-handler.js';
import { eventually } from '../../support/ferry-worker.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import { modelDoc, TEST_SINKS, workflowBundle } from '../../support/workflow-harness.js';
import { ensureOnly, ensureReadDelete } from './fixtures/caller.js';

const harness = useHarness();
const id = randomBytes(3).toString('hex');
const cluster = `nexus-${id}`;
const callerNamespace = `caller-${id}`;
const endpoint = `ferry-${id}`;
const callerQueue = `caller-${id}`;
// Models whose name starts with `slow-` never get healthy: their callers wait until the test cancels them.
const stub = new StubActivities().failForModels('awaitHealth', 'slow-', () => new Error('never healthy'));

let stop: () => Promise<void> = async () => undefined;
let caller: Client;

beforeAll(async () => {
  const { connection } = harness.client;
  await connection.workflowService.registerNamespace({
    namespace: callerNamespace,
    workflowExecutionRetentionPeriod: msNumberToTs(24 * 3_600_000),
  });
  await connection.operatorService.createNexusEndpoint({
    spec: { name: endpoint, target: { worker: { namespace: 'default', taskQueue: `ferry-${cluster}` } } },
  });
  caller = new Client({ connection, namespace: callerNamespace });
  // Ferry's worker, as createWorker builds it, with stub Kubernetes activities.
  const ferry = await Worker.create({
    connection: harness.connection,
    taskQueue: `ferry-${cluster}`,
    workflowBundle: harness.bundle,
    activities: { ...createServingActivities(harness.client), ...stub.activities() },
    nexusServices: [ferryModelsHandler],
    sinks: TEST_SINKS,
    shutdownGraceTime: '200ms',
  });
  // The caller's worker, in the caller's namespace, with nothing of Ferry's but the service contract.
  const callerWorker = await Worker.create({
    connection: harness.connection,
    namespace: callerNamespace,
    taskQueue: callerQueue,
    workflowBundle: await workflowBundle(join(import.meta.dirname, 'fixtures', 'caller.ts')),
    shutdownGraceTime: '200ms',
  });
  const running = Promise.all([ferry.run(), callerWorker.run()]);
  stop = async () => {
    ferry.shutdown();
    callerWorker.shutdown();
    await running;
  };
}, 120_000);

afterAll(async () => {
  await stop();
  await harness.client.connection.operatorService
    .listNexusEndpoints({ name: endpoint })
    .then(async ({ endpoints }) => {
      for (const e of endpoints ?? [])
        await harness.client.connection.operatorService.deleteNexusEndpoint({ id: e.id, version: e.version });
    })
    .catch(() => undefined);
});

const docIn = (name: string) => modelDoc((d) => (d.spec.cluster = cluster), name);

it('ensures a model from another namespace, gets its endpoint and status, and deletes it', async () => {
  const name = `nx-${id}`;
  const result = await caller.workflow.execute(ensureReadDelete, {
    taskQueue: callerQueue,
    workflowId: `caller-${name}`,
    args: [{ endpoint, document: docIn(name) }],
  });
  expect(result.ensured).toMatchObject({
    ref: { cluster, namespace: 'models', name },
    generation: 1,
    endpoint: `http://${name}.models.svc:8000/v1`,
    servedModelName: name,
  });
  expect(result.phase).toBe('Ready');
  expect(result.deleted).toMatchObject({
    alreadyDeleted: false,
    deleted: expect.arrayContaining([`Deployment/${name}`]),
  });
  const model = harness.client.workflow.getHandle(workflowIdFor({ cluster, namespace: 'models', name }));
  expect((await model.describe()).status.name).toBe('COMPLETED');
  expect(stub.callsOf('tearDown').filter((c) => c.input.model.metadata.name === name)).toHaveLength(1);
});

it('rolls a new checkpoint out as a canary when ensured again, and ensuring it once more changes nothing', async () => {
  const name = `nx-canary-${id}`;
  const doc = modelDoc((d) => {
    d.spec.cluster = cluster;
    d.spec.front = {};
    d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 50, gate: '1s' }] };
  }, name);
  const ensure = async (document: unknown, call: string) =>
    await caller.workflow.execute(ensureOnly, {
      taskQueue: callerQueue,
      workflowId: `caller-${name}-${call}`,
      args: [{ endpoint, document }],
    });
  expect(await ensure(doc, 'first')).toMatchObject({ generation: 1 });
  doc.spec.source.huggingface.revision = 'v2';
  // The operation answers once the canary has taken every request.
  expect(await ensure(doc, 'v2')).toMatchObject({ generation: 2 });
  const model = harness.client.workflow.getHandle(workflowIdFor({ cluster, namespace: 'models', name }));
  expect(await model.query(statusQuery)).toMatchObject({
    phase: 'Ready',
    revision: 'r2',
    rollout: { revision: 'r2', state: 'Promoted', gates: [{ gate: '1s', result: 'Passed' }] },
  });
  expect(await ensure(doc, 'v2-again')).toMatchObject({ generation: 2 });
  const pulls = stub.callsOf('startPuller').filter((c) => c.input.model.metadata.name === name);
  expect(pulls.map((c) => c.input.slot)).toEqual([undefined, 'b']);
  await model.terminate('test finished');
});

it('leaves the model as it was when the caller is cancelled while it waits for Ready', async () => {
  const name = `slow-${id}`;
  const waiting = await caller.workflow.start(ensureOnly, {
    taskQueue: callerQueue,
    workflowId: `caller-${name}`,
    args: [{ endpoint, document: docIn(name) }],
  });
  const model = harness.client.workflow.getHandle(workflowIdFor({ cluster, namespace: 'models', name }));
  await eventually(
    () => model.query(statusQuery).catch(() => undefined),
    (s?: ModelStatus) => s?.phase === 'Starting',
  );
  await waiting.cancel();
  await expect(waiting.result()).rejects.toThrow();
  // The cancellation reaches the command workflow behind the operation, which stops waiting and ends cancelled ...
  const commands = `WorkflowType = "ensureModelWorkflow" AND WorkflowId STARTS_WITH "ensure/${model.workflowId}/"`;
  await eventually(
    async () => {
      const statuses: string[] = [];
      for await (const wf of harness.client.workflow.list({ query: commands })) statuses.push(wf.status.name);
      return statuses;
    },
    (statuses) => statuses.length === 1 && statuses[0] === 'CANCELLED',
  );
  // ... and the model's workflow goes on, not deleting.
  expect((await model.describe()).status.name).toBe('RUNNING');
  expect((await model.query(statusQuery)).phase).not.toMatch(/Deleting|Deleted/);
  expect(stub.callsOf('tearDown').filter((c) => c.input.model.metadata.name === name)).toHaveLength(0);
  await model.terminate('test finished');
});
