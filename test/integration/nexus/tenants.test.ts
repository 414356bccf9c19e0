// Tenants (docs/security.md) on the dev server: a Ferry worker started with a tenants file (worker/create-worker.ts,
// stub Kubernetes activities) hosts each tenant's Nexus service on the task queue its endpoint targets. A request
// outside a grant is refused `Forbidden`, naming the rule, with nothing started; a tenant neither sees nor touches
// another's model, nor an admin's, in a namespace they share. The tenant is the endpoint a call came through: the dev
// server lets any namespace call any endpoint (Temporal Cloud's allowlist, or a self-hosted Authorizer, is what keeps
// team-b off team-a's endpoint), so one caller namespace stands for both teams here.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { ApplicationFailure, msNumberToTs } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveModel, waitForPhase } from '../../../client/index.js';
import { workflowIdFor, type ModelRef, type ModelStatus } from '../../../workflows/contract/index.js';
import { startFerryWorker, type FerryTestWorker } from '../../support/ferry-worker.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import { workflowBundle, type Doc } from '../../support/workflow-harness.js';
import { callOperation, type CallOutcome, type OperationInput } from './fixtures/caller.js';

const harness = useHarness();
const id = randomBytes(3).toString('hex');
const cluster = `ten-${id}`;
const callerNamespace = `tenants-${id}`;
const callerQueue = `tenants-caller-${id}`;
const endpoints = { 'team-a': `ferry-a-${id}`, 'team-b': `ferry-b-${id}` };
const queues = { 'team-a': `ferry-nexus-a-${id}`, 'team-b': `ferry-nexus-b-${id}` };
// Tenants' names are global to Ferry's namespace (a quota spans every cluster): unique to this run.
const A = `team-a-${id}`;
const B = `team-b-${id}`;
const stub = new StubActivities();

let ferry: FerryTestWorker;
let caller: Client;
let stop: () => Promise<void> = async () => undefined;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-tenants-'));
  const file = join(dir, 'tenants.yaml');
  const grant = (team: 'team-a' | 'team-b', gpus: { perModel: number; total: number }) => ({
    nexusTaskQueue: queues[team],
    clusters: [cluster],
    namespaces: [team, 'shared'],
    images: { repositories: ['vllm/vllm-openai:'] },
    gpus,
    // team-b's grant also allows Secrets by label: the model's cluster checks those (here a stub that says which).
    secrets: team === 'team-a' ? [`hf-${team}`] : [`hf-${team}`, { matchLabels: { 'ferry.dev/tenant': team } }],
    engineArgs: ['--max-model-len'],
  });
  writeFileSync(
    file,
    JSON.stringify({
      tenants: {
        [A]: grant('team-a', { perModel: 2, total: 2 }),
        [B]: grant('team-b', { perModel: 1, total: 1 }),
      },
    }),
  );
  ferry = await startFerryWorker(harness, stub, { cluster, env: { FERRY_TENANTS_FILE: file } });
  const { connection } = harness.client;
  await connection.workflowService.registerNamespace({
    namespace: callerNamespace,
    workflowExecutionRetentionPeriod: msNumberToTs(24 * 3_600_000),
  });
  for (const team of ['team-a', 'team-b'] as const) {
    await connection.operatorService.createNexusEndpoint({
      spec: { name: endpoints[team], target: { worker: { namespace: 'default', taskQueue: queues[team] } } },
    });
  }
  caller = new Client({ connection, namespace: callerNamespace });
  const callerWorker = await Worker.create({
    connection: harness.connection,
    namespace: callerNamespace,
    taskQueue: callerQueue,
    workflowBundle: await workflowBundle(join(import.meta.dirname, 'fixtures', 'caller.ts')),
    shutdownGraceTime: '200ms',
  });
  const running = callerWorker.run();
  stop = async () => {
    callerWorker.shutdown();
    await running;
  };
}, 120_000);

afterAll(async () => {
  await stop();
  await ferry?.close();
  const { operatorService } = harness.client.connection;
  for (const name of Object.values(endpoints)) {
    const { endpoints: found } = await operatorService.listNexusEndpoints({ name }).catch(() => ({ endpoints: [] }));
    for (const e of found ?? []) await operatorService.deleteNexusEndpoint({ id: e.id, version: e.version });
  }
});

/** One operation through `team`'s endpoint, as a caller's workflow sees it. */
async function call(team: keyof typeof endpoints, operation: OperationInput['operation'], input: unknown) {
  return await caller.workflow.execute(callOperation, {
    taskQueue: callerQueue,
    workflowId: `call-${operation}-${randomBytes(4).toString('hex')}`,
    args: [{ endpoint: endpoints[team], operation, input }],
  });
}

/** The failure type the caller's workflow finds under the Nexus operation's failure, and its message. */
function refusal(outcome: CallOutcome): { type?: string; message?: string } {
  const typed = outcome.failure?.find((f) => f.type !== undefined && f.name === 'ApplicationFailure');
  return { type: typed?.type, message: typed?.message };
}

const doc = (name: string, namespace: string, patch: (spec: Doc) => void = () => undefined): Doc =>
  ferry.doc((d) => {
    d.metadata.namespace = namespace;
    patch(d);
  }, name);

async function exists(ref: ModelRef): Promise<boolean> {
  return await harness.client.workflow
    .getHandle(workflowIdFor(ref))
    .describe()
    .then(() => true)
    .catch(() => false);
}

async function commandsFor(ref: ModelRef): Promise<number> {
  let n = 0;
  const query = `WorkflowId STARTS_WITH "ensure/${workflowIdFor(ref)}/"`;
  for await (const _ of harness.client.workflow.list({ query })) n++;
  return n;
}

describe('a tenant outside its grant', () => {
  const cases: [string, (name: string) => Doc, RegExp][] = [
    ['a namespace', (n) => doc(n, 'prod'), new RegExp(`^tenant ${A} may not serve into namespace prod$`)],
    [
      'a cluster',
      (n) => doc(n, 'team-a', (d) => (d.spec.cluster = 'elsewhere')),
      /may not serve into cluster elsewhere/,
    ],
    [
      'an image',
      (n) => doc(n, 'team-a', (d) => (d.spec.engine.image = 'evil.example.com/vllm:1')),
      /may not run image "evil.example.com\/vllm:1" \(engine.image\)/,
    ],
    [
      'GPUs per model',
      (n) => doc(n, 'team-a', (d) => ((d.spec.resources = { gpus: 1 }), (d.spec.replicas = 3))),
      /may hold 2 GPUs per model, this one asks for 3/,
    ],
    [
      "another's Secret",
      (n) => doc(n, 'team-a', (d) => (d.spec.source.huggingface.tokenSecret = { name: 'hf-team-b', key: 'token' })),
      /may not read Secret hf-team-b/,
    ],
    [
      'an engine flag',
      (n) => doc(n, 'team-a', (d) => (d.spec.engine.args = ['--enforce-eager'])),
      /may not pass --enforce-eager in engine.args/,
    ],
  ];
  it.each(cases)('is refused %s, Forbidden, naming the rule, with nothing started', async (_what, make, rule) => {
    const name = `out-${randomBytes(3).toString('hex')}`;
    const document = make(name);
    const outcome = await call('team-a', 'ensureModel', { document });
    expect(outcome.ok).toBeUndefined();
    expect(refusal(outcome)).toMatchObject({ type: 'Forbidden', message: expect.stringMatching(rule) });
    const ref = { cluster: document.spec.cluster, namespace: document.metadata.namespace, name };
    expect(await exists(ref)).toBe(false);
    expect(await commandsFor(ref)).toBe(0);
    expect(stub.calls.filter((c) => JSON.stringify(c.input).includes(name))).toEqual([]);
  });
});

describe('two tenants sharing a namespace', () => {
  const name = `shared-${id}`;
  const ref = { cluster, namespace: 'shared', name };

  beforeAll(async () => {
    const outcome = await call('team-a', 'ensureModel', { document: doc(name, 'shared') });
    expect(outcome.failure).toBeUndefined();
    expect(outcome.ok).toMatchObject({ ref, generation: 1 });
  }, 120_000);

  it("records the owner: team-a reads its model's status with its tenant", async () => {
    const outcome = await call('team-a', 'getModelStatus', { ref });
    expect(outcome.ok).toMatchObject({ name, tenant: A, phase: 'Ready' });
    // Who asked (audit): the tenant, which its endpoint proves, and the caller workflow the request's links name.
    expect((outcome.ok as ModelStatus).requestedBy).toMatch(
      new RegExp(
        `^tenant ${A} through Nexus \\(caller ${callerNamespace}/call-ensureModel-[0-9a-f]+, as its links say\\)$`,
      ),
    );
  });

  it("answers team-b as if team-a's model did not exist, and leaves it as it was", async () => {
    const absent = await call('team-b', 'getModelStatus', { ref: { ...ref, name: `never-${id}` } });
    const status = await call('team-b', 'getModelStatus', { ref });
    expect(refusal(status)).toEqual({
      type: 'ModelNotFound',
      message: `${name} (namespace shared, cluster ${cluster}): no such model`,
    });
    // The same words as for a model nobody serves.
    expect(refusal(absent).type).toBe('ModelNotFound');
    expect(refusal(absent).message).toBe(`never-${id} (namespace shared, cluster ${cluster}): no such model`);

    expect(refusal(await call('team-b', 'deleteModel', { ref, reason: 'mine now' }))).toMatchObject({
      type: 'ModelNotFound',
    });
    const taken = await call('team-b', 'ensureModel', { document: doc(name, 'shared') });
    expect(refusal(taken)).toEqual({
      type: 'Forbidden',
      message: `tenant ${B} may not serve ${name} (namespace shared, cluster ${cluster}): the name is taken`,
    });
    const model = harness.client.workflow.getHandle(workflowIdFor(ref));
    expect((await model.describe()).status.name).toBe('RUNNING');
    const after = await waitForPhase(harness.client, ref, ['Ready'], { timeoutMs: 10_000 });
    expect(after).toMatchObject({ generation: 1, tenant: A });
    expect(stub.callsOf('tearDown').filter((c) => c.input.model.metadata.name === name)).toHaveLength(0);
  });

  it("refuses team-a's next model past its total of GPUs, counting the ones it holds", async () => {
    const second = `second-${id}`;
    const outcome = await call('team-a', 'ensureModel', {
      document: doc(second, 'team-a', (d) => (d.spec.resources = { gpus: 2 })),
    });
    expect(refusal(outcome)).toEqual({
      type: 'Forbidden',
      message: `tenant ${A} may hold 2 GPUs in total; its other models hold 1, this one asks for 2`,
    });
    expect(await exists({ cluster, namespace: 'team-a', name: second })).toBe(false);
  });

  it('lets the owner delete it', async () => {
    const outcome = await call('team-a', 'deleteModel', { ref, reason: 'done' });
    expect(outcome.ok).toMatchObject({ ref, alreadyDeleted: false });
    const status: ModelStatus = (await call('team-a', 'getModelStatus', { ref })).ok as ModelStatus;
    expect(status).toMatchObject({ phase: 'Deleted', tenant: A });
    const teardown = status.timeline.find((e) => e.step === 'teardown');
    expect(teardown?.detail).toMatch(
      new RegExp(
        `^deleted \\d+ object\\(s\\) \\(done, asked by tenant ${A} through Nexus \\(caller ${callerNamespace}/`,
      ),
    );
  });
});

describe('a Secret its grant allows by its labels', () => {
  /** What the cluster's worker says: a Secret named unlabelled-* lacks the labels (the real check reads them). */
  beforeAll(() => {
    stub.on('checkTenantGrant', async ({ tenant, document }) => {
      const secret = (document as Doc).spec.source.huggingface.tokenSecret?.name ?? '';
      if (secret.startsWith('unlabelled-')) {
        throw ApplicationFailure.nonRetryable(`tenant ${tenant} may not read Secret ${secret}: labels`, 'Forbidden');
      }
    });
  });
  const withSecret = (name: string, secret: string) =>
    doc(name, 'team-b', (d) => {
      d.spec.resources = { gpus: 0 };
      d.spec.source.huggingface.tokenSecret = { name: secret, key: 'token' };
    });
  const checksOf = (name: string) =>
    stub.callsOf('checkTenantGrant').filter((c) => JSON.stringify(c.input.document).includes(name));

  it("is checked on the model's cluster before the model starts, and refused there with nothing started", async () => {
    const name = `refused-${id}`;
    const outcome = await call('team-b', 'ensureModel', { document: withSecret(name, `unlabelled-${id}`) });
    expect(refusal(outcome)).toEqual({
      type: 'Forbidden',
      message: `tenant ${B} may not read Secret unlabelled-${id}: labels`,
    });
    expect(checksOf(name).map((c) => c.input.tenant)).toEqual([B]);
    const ref = { cluster, namespace: 'team-b', name };
    expect(await exists(ref)).toBe(false);
    expect(stub.calls.filter((c) => c.name !== 'checkTenantGrant' && JSON.stringify(c.input).includes(name))).toEqual(
      [],
    );
  });

  it('serves the model when its labels allow it; a Secret listed by name needs no check', async () => {
    const name = `allowed-${id}`;
    const outcome = await call('team-b', 'ensureModel', { document: withSecret(name, `labelled-${id}`) });
    expect(outcome.failure).toBeUndefined();
    expect(outcome.ok).toMatchObject({ ref: { cluster, namespace: 'team-b', name }, generation: 1 });
    expect(checksOf(name)).toHaveLength(1);
    const listed = `listed-${id}`;
    expect(
      (await call('team-b', 'ensureModel', { document: withSecret(listed, 'hf-team-b') })).failure,
    ).toBeUndefined();
    expect(checksOf(listed)).toEqual([]);
    for (const n of [name, listed]) {
      expect(
        (await call('team-b', 'deleteModel', { ref: { cluster, namespace: 'team-b', name: n } })).ok,
      ).toBeDefined();
    }
  });
});

it("keeps an admin's model from every tenant", async () => {
  const name = `admin-${id}`;
  const ref = { cluster, namespace: 'shared', name };
  await serveModel(harness.client, doc(name, 'shared'));
  expect(refusal(await call('team-a', 'getModelStatus', { ref })).type).toBe('ModelNotFound');
  expect(refusal(await call('team-a', 'deleteModel', { ref })).type).toBe('ModelNotFound');
  expect(refusal(await call('team-a', 'ensureModel', { document: doc(name, 'shared') })).message).toMatch(
    /the name is taken/,
  );
  const status = await waitForPhase(harness.client, ref, ['Ready'], { timeoutMs: 30_000 });
  expect(status.tenant).toBeUndefined();
});

it('refuses a caller that names a ref that is not one', async () => {
  const outcome = await call('team-a', 'getModelStatus', { ref: { cluster, namespace: 7 } });
  expect(outcome.failure?.map((f) => f.message).join(' ')).toMatch(/ref must be \{ cluster, namespace, name \}/);
});
