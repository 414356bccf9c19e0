// Two clusters on one machine (`npm run local:up -- --clusters 2`, docs/local-stack.md): cluster east is a second
// Kubernetes control plane (its own API server over the same etcd under another prefix, controller-manager, scheduler,
// KWOK nodes and engine stand-in) with a worker of its own on task queue ferry-east. These tests start it when the
// stack runs one cluster (test/support/east.ts). First the stack's two workers, each serving its own cluster; then a
// model moved between two clusters through `ferry move` and the client library (moveModel, abortMove), by a worker
// process on each control plane. Real: both control planes, the worker processes, Temporal; simulated: KWOK's pods, the engine
// stand-in and the download.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  getModelStatus,
  MoveFailedError,
  moveModel,
  MoveRefusedError,
  moveResult,
  moveStatus,
  startMove,
  type ModelSummary,
} from '../../../client/index.js';
import { describeModel, queryModel } from '../../../client/model-status.js';
import {
  moveWorkflowIdFor,
  specQuery,
  taskQueueFor,
  type ModelRef,
  type MoveStatus,
} from '../../../workflows/contract/index.js';
import type { MoveModelWorkflow } from '../../../workflows/move.js';
import { startEastWorker, startWorkersOnBoth, useEast } from '../../support/east.js';
import type { WorkerProcess } from '../../support/e2e.js';
import { expectOk, ferryJson, simulatedModelDoc, terminateModelsOf, uniqueCluster } from '../../support/e2e.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { deleteNamespace, waitFor, type Clients } from '../../support/kube.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';

// First: its afterAll, which stops an east these tests started, runs last.
const east = useEast();
const kube = useNamespace('clusters', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const west = uniqueCluster('mv-west');
const eastCluster = uniqueCluster('mv-east');
let connection: Connection;
/** East's API server while a test has it stopped (SIGSTOP). */
let frozen: number | undefined;
let client: Client;
/** The worker process of `eastCluster`: a test stops it, and starts another. */
let eastWorker: WorkerProcess;

beforeAll(async () => {
  // The same namespace on east: one model name in one namespace, once on each cluster.
  await east.kube.core.createNamespace({ body: { metadata: { name: kube.ns, labels: { ...RESTRICTED } } } });
  await waitFor(`ServiceAccount ${kube.ns}/default on east`, 30_000, async () => {
    await east.kube.core.readNamespacedServiceAccount({ name: 'default', namespace: kube.ns });
    return true;
  });
  eastWorker = (await startWorkersOnBoth(startWorkerProcess, east, west, eastCluster)).east;
  connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  client = new Client({ connection });
}, 180_000);

afterAll(async () => {
  // A test that timed out while east's API server was frozen never reached its own SIGCONT.
  if (frozen !== undefined) process.kill(frozen, 'SIGCONT');
  await terminateModelsOf('east').catch(() => undefined);
  await connection?.close();
  await deleteNamespace(east.kube, kube.ns);
});

const deployment = (c: Clients, name: string) =>
  c.apps.readNamespacedDeployment({ name, namespace: kube.ns }).then(
    (d) => d,
    () => undefined,
  );
const uidOf = async (c: Clients, name: string) => (await deployment(c, name))?.metadata?.uid;

describe('two clusters on the local stack', { timeout: 300_000 }, () => {
  it('east is a control plane of its own: its own simulated GPU nodes, its objects apart from the first', async () => {
    const nodes = await east.kube.core.listNode();
    // East's own: not a node another test file made for itself there (useOwnNode's label; e2e/placement.test.ts).
    const ready = nodes.items.filter(
      (n) =>
        !n.metadata?.labels?.['ferry.dev/test-node'] &&
        n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    expect(ready.map((n) => n.status?.capacity?.['nvidia.com/gpu'])).toEqual(['4', '4']);
    await east.kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: { metadata: { name: 'only-east' } } });
    await expect(kube.core.readNamespacedConfigMap({ name: 'only-east', namespace: kube.ns })).rejects.toThrow();
  });

  it("serves a model on each cluster by that cluster's worker; `ferry list -A` shows both; deleting one leaves the other", async () => {
    for (const cluster of ['default', 'east']) {
      const doc = simulatedModelDoc(kube.ns, cluster, 'chat', '1s');
      expectOk(
        await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']),
        `ferry serve on ${cluster}`,
      );
    }
    const listed = await ferryJson<ModelSummary[]>(['list', '-A']);
    const ours = listed.filter((m) => m.namespace === kube.ns);
    expect(ours.map((m) => [m.cluster, m.name, m.phase]).sort()).toEqual([
      ['default', 'chat', 'Ready'],
      ['east', 'chat', 'Ready'],
    ]);
    const table = expectOk(await runFerry(['list', '-A']), 'ferry list -A').stdout;
    expect(table).toMatch(new RegExp(`^${kube.ns} +chat +default +Ready `, 'm'));
    expect(table).toMatch(new RegExp(`^${kube.ns} +chat +east +Ready `, 'm'));
    // Each worker applied its model to its own control plane: two Deployments, one on each API server.
    const [onWest, onEast] = await Promise.all([deployment(kube, 'chat'), deployment(east.kube, 'chat')]);
    expect(onWest?.metadata?.uid).toBeDefined();
    expect(onEast?.metadata?.uid).toBeDefined();
    expect(onEast?.metadata?.uid).not.toBe(onWest?.metadata?.uid);

    expectOk(await runFerry(['delete', 'chat', '-n', kube.ns, '--cluster', 'east', '--wait']), 'ferry delete on east');
    expect(await deployment(east.kube, 'chat')).toBeUndefined();
    expect((await deployment(kube, 'chat'))?.metadata?.uid).toBe(onWest?.metadata?.uid);
    const after = await ferryJson<ModelSummary[]>(['list', '-A']);
    expect(after.filter((m) => m.namespace === kube.ns).map((m) => m.cluster)).toEqual(['default']);
    expectOk(await runFerry(['delete', 'chat', '-n', kube.ns, '--cluster', 'default', '--wait']), 'ferry delete');
  });
});

const ref = (name: string, cluster = west): ModelRef => ({ cluster, namespace: kube.ns, name });

async function serveOnWest(name: string, download: string): Promise<void> {
  const doc = simulatedModelDoc(kube.ns, west, name, download);
  expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), `ferry serve ${name}`);
}

describe('moving a model between clusters', { timeout: 300_000 }, () => {
  it('`ferry move --wait` serves it on the target, waits until it is Ready there, then deletes the source, a line per step', async () => {
    await serveOnWest('moved', '1s');
    const moved = expectOk(
      await runFerry(['move', 'moved', '-n', kube.ns, '--to', eastCluster, '--wait', '--timeout', '4m']),
      'ferry move',
    );
    const steps = moved.stderr.split('\n').filter((line) => line.startsWith('  '));
    expect(steps.map((line) => line.trim().split(':')[0])).toEqual(['serve', 'ready', 'teardown', 'done']);
    expect(moved.stdout).toMatch(
      new RegExp(`^moved \\(namespace ${kube.ns}, cluster ${west}\\) moved to cluster ${eastCluster}: serving at http`),
    );
    const result = await ferryJson<MoveStatus>(['move', 'moved', '-n', kube.ns, '--status']);
    expect(result).toMatchObject({ from: ref('moved'), to: ref('moved', eastCluster), step: 'done' });
    expect(result.endpoint).toMatch(/^http/);

    const target = await getModelStatus(client, ref('moved', eastCluster));
    expect(target).toMatchObject({ phase: 'Ready', endpoint: result.endpoint });
    expect(moved.stdout).toContain(`serving at ${result.endpoint}`);
    // The switch: the source's status says where the model serves now, and `ferry status` of it too.
    const source = await getModelStatus(client, ref('moved'));
    expect(source).toMatchObject({
      phase: 'Deleted',
      movedTo: { cluster: eastCluster, endpoint: result.endpoint, move: `move/${kube.ns}/moved` },
    });
    const shown = expectOk(await runFerry(['status', 'moved', '-n', kube.ns, '--cluster', west]), 'ferry status');
    expect(shown.stdout).toContain(`moved to:    cluster ${eastCluster} at ${result.endpoint} (move/${kube.ns}/moved)`);
    // The target's objects are on east's API server; the source's are gone from the first.
    expect(await uidOf(east.kube, 'moved')).toBeDefined();
    expect(await uidOf(kube, 'moved')).toBeUndefined();

    const status = await moveStatus(client, { namespace: kube.ns, name: 'moved' });
    expect(status.step).toBe('done');
    expect(status.timeline.map((e) => e.step)).toEqual(['serve', 'ready', 'teardown', 'done']);
    expect(status.timeline.every((e) => e.endedAt)).toBe(true);

    // A move to the cluster it is on is refused, with nothing started.
    await expect(startMove(client, ref('moved', eastCluster), eastCluster)).rejects.toBeInstanceOf(MoveRefusedError);
  });

  it('refuses a move onto a name served there, and a move while another of the name is under way', async () => {
    await serveOnWest('taken', '1s');
    const doc = simulatedModelDoc(kube.ns, eastCluster, 'taken', '1s');
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve on east');
    const refused = await startMove(client, ref('taken'), eastCluster).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MoveRefusedError);
    expect(String(refused)).toMatch(/is served already/);
    // The command line says the same, exits 1, and starts nothing.
    const cli = await runFerry(['move', 'taken', '-n', kube.ns, '--cluster', west, '--to', eastCluster]);
    expect(cli).toMatchObject({ code: 1, stdout: '' });
    expect(cli.stderr).toMatch(
      /^error: taken \(namespace .*\) is served already: delete it, or move to another cluster/,
    );
    expect((await getModelStatus(client, ref('taken'))).phase).toBe('Ready');
    // The name taken on east after the client looked (the workflow started past the client's check): the move sends
    // that model nothing and leaves it, and the source, as they were.
    const theirs = await uidOf(east.kube, 'taken');
    const racing = await client.workflow.start<typeof MoveModelWorkflow>('MoveModelWorkflow', {
      workflowId: moveWorkflowIdFor(ref('taken')),
      taskQueue: taskQueueFor(west),
      args: [{ from: ref('taken'), to: eastCluster, document: await queryModel(client, ref('taken'), specQuery) }],
    });
    const lost = await moveResult(racing).catch((e: unknown) => e);
    expect(lost).toMatchObject({ reason: 'NameConflict' });
    expect(String(lost)).toMatch(/did not start: taken \(namespace .*\) is served already, and not by this request/);
    expect(await getModelStatus(client, ref('taken', eastCluster))).toMatchObject({ phase: 'Ready', generation: 1 });
    expect(await uidOf(east.kube, 'taken')).toBe(theirs);
    expect((await getModelStatus(client, ref('taken'))).phase).toBe('Ready');
  });

  it('an abort before the switch deletes the target and leaves the source as it was', async () => {
    // A download of 20 s on the target, so the abort comes while the move waits for Ready.
    await serveOnWest('slow', '20s');
    const before = await uidOf(kube, 'slow');
    const handle = await startMove(client, ref('slow'), eastCluster);
    await expect(startMove(client, ref('slow'), eastCluster)).rejects.toThrow(/a move of .* is under way/);
    await waitFor('the move to wait for the target', 60_000, async () => {
      return (await moveStatus(client, { namespace: kube.ns, name: 'slow' })).step === 'ready';
    });
    const aborted = expectOk(
      await runFerry(['move', 'slow', '-n', kube.ns, '--abort', '-o', 'json']),
      'ferry move --abort',
    );
    const status = JSON.parse(aborted.stdout) as MoveStatus;
    expect(status.step).toBe('aborted');
    expect(status.timeline.map((e) => e.step)).toEqual(['serve', 'ready', 'aborted']);
    await expect(handle.result()).rejects.toThrow();
    expect((await getModelStatus(client, ref('slow', eastCluster))).phase).toBe('Deleted');
    expect(await uidOf(east.kube, 'slow')).toBeUndefined();
    const source = await getModelStatus(client, ref('slow'));
    expect(source.phase).toBe('Ready');
    expect(await uidOf(kube, 'slow')).toBe(before);
    // Nothing is under way now: a second abort says so, with exit 1.
    const again = await runFerry(['move', 'slow', '-n', kube.ns, '--abort']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`error: no move of ${kube.ns}/slow is under way: the last one ended aborted`);
  });

  it('a target not Ready in time is deleted, the move fails with the reason, and the source stays', async () => {
    await serveOnWest('late', '20s');
    const failed = await moveModel(client, ref('late'), eastCluster, { readyTimeoutMs: 3_000 }).catch(
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(MoveFailedError);
    expect(failed).toMatchObject({ reason: 'ReadyTimeout' });
    expect(String(failed)).toMatch(/the move to cluster .* failed \(ReadyTimeout: .*\); the target was deleted/);
    const status = await moveStatus(client, { namespace: kube.ns, name: 'late' });
    expect(status).toMatchObject({ step: 'failed', error: { reason: 'ReadyTimeout' } });
    expect((await getModelStatus(client, ref('late', eastCluster))).phase).toBe('Deleted');
    expect((await getModelStatus(client, ref('late'))).phase).toBe('Ready');
  });

  it("a source cluster that does not answer does not hold the move: it completes, and the source's teardown ends once the cluster is back", async () => {
    // Served on east, moved to the first cluster while east's API server is frozen (SIGSTOP: its connections open,
    // nothing answered, as behind a partition); east's worker goes on, so the source accepts the delete.
    const doc = simulatedModelDoc(kube.ns, eastCluster, 'far', '1s');
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve on east');
    const apiServer = Number(readFileSync(join(repoRoot, '.ferry/run/east/kube-apiserver.pid'), 'utf8').trim());
    process.kill(apiServer, 'SIGSTOP');
    frozen = apiServer;
    try {
      const result = await moveModel(client, ref('far', eastCluster), west, { teardownTimeoutMs: 5_000 });
      expect(result).toMatchObject({ to: ref('far'), teardownPending: true, deleted: [] });
      expect((await getModelStatus(client, ref('far'))).phase).toBe('Ready');
      const status = await moveStatus(client, { namespace: kube.ns, name: 'far' });
      expect(status.step).toBe('done');
      expect(status.timeline.at(-1)!.detail).toContain(`the teardown on ${eastCluster} goes on`);
      const source = await getModelStatus(client, ref('far', eastCluster));
      expect(source).toMatchObject({ phase: 'Deleting', movedTo: { cluster: west, endpoint: result.endpoint } });
    } finally {
      process.kill(apiServer, 'SIGCONT');
      frozen = undefined;
    }
    await waitFor("the source's teardown done once east answers", 120_000, async () => {
      return (await getModelStatus(client, ref('far', eastCluster))).phase === 'Deleted';
    });
    expect(await uidOf(east.kube, 'far')).toBeUndefined();
  });

  it("a source cluster whose worker is gone: the move runs on the target's worker, serves the spec its history holds, and the source applies the delete, sent as a signal, once a worker is back", async () => {
    // Served on east, then updated (so the spec the move reads is the update's, not the start's); then east's worker
    // stops. Its API server answers: only the worker is gone.
    const doc = simulatedModelDoc(kube.ns, eastCluster, 'orphan', '1s');
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve on east');
    doc.spec.engine = { ...(doc.spec.engine as object), args: ['--max-model-len=2048'] };
    expectOk(await runFerry(['update', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry update on east');
    await eastWorker.stop();

    const result = await moveModel(client, ref('orphan', eastCluster), west, { teardownTimeoutMs: 5_000 });
    expect(result).toMatchObject({ to: ref('orphan'), teardownPending: true, teardownSignalled: true, deleted: [] });
    const status = await moveStatus(client, { namespace: kube.ns, name: 'orphan' });
    expect(status.timeline.at(-1)!.detail).toContain(`no worker of ${eastCluster} took the delete in 5 s`);
    const move = await client.workflow.getHandle(moveWorkflowIdFor({ namespace: kube.ns, name: 'orphan' })).describe();
    expect(move.taskQueue).toBe(taskQueueFor(west));
    const target = await getModelStatus(client, ref('orphan'));
    expect(target.phase).toBe('Ready');
    const served = await queryModel(client, ref('orphan'), specQuery);
    expect(served.spec.engine.args).toEqual(['--max-model-len=2048']);
    // Nothing applied the delete yet: no worker runs the source's workflow, and its objects stay.
    expect((await describeModel(client, ref('orphan', eastCluster))).status.name).toBe('RUNNING');
    expect(await uidOf(east.kube, 'orphan')).toBeDefined();

    eastWorker = await startEastWorker(startWorkerProcess, east, eastCluster);
    await waitFor('the source deleted once its worker is back', 120_000, async () => {
      return (await getModelStatus(client, ref('orphan', eastCluster))).phase === 'Deleted';
    });
    const source = await getModelStatus(client, ref('orphan', eastCluster));
    expect(source.movedTo).toMatchObject({ cluster: west, endpoint: target.endpoint, move: `move/${kube.ns}/orphan` });
    expect(await uidOf(east.kube, 'orphan')).toBeUndefined();
  });
});
