// Placement at start on two clusters (docs/design/fleet.md, §3): a document with `spec.placement` is served on the
// listed cluster where its replicas fit with the most GPUs left, chosen by PlaceModelWorkflow from each cluster's
// `clusterCapacity`; none fits, and nothing is created. A worker process per cluster: `west` on the first control
// plane, the other on east's. The model's pods go to a node of the file's own on each control plane (same name,
// label and taint), so the GPUs the tests beside these take on the shared nodes change nothing here.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simulatedNode } from '../../../deploy/local/simulated-node.js';
import { modelHandle, queryModel } from '../../../client/model-status.js';
import { applyModel, NoCapacityError, type ModelSummary } from '../../../client/index.js';
import { placeWorkflowIdFor, specQuery } from '../../../workflows/contract/index.js';
import { startWorkersOnBoth, useEast } from '../../support/east.js';
import { expectOk, ferryJson, modelObjects, simulatedModelDoc, uniqueCluster } from '../../support/e2e.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useOwnNode, useWorkerProcesses } from '../../support/fixtures.js';
import { deleteNamespace, waitFor, type Clients } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';

// First: its afterAll, which stops an east these tests started, runs last.
const east = useEast();
const kube = useNamespace('placement', RESTRICTED);
const node = useOwnNode();
const startWorkerProcess = useWorkerProcesses();
const west = uniqueCluster('pl-west');
const eastCluster = uniqueCluster('pl-east');
let connection: Connection;
/** The placed model's document, as the first test last applied it. */
let placedFile: string;
let client: Client;

beforeAll(async () => {
  await east.kube.core.createNamespace({ body: { metadata: { name: kube.ns, labels: { ...RESTRICTED } } } });
  // The file's own node on east too: the same name, label and taint as on the first control plane.
  const onEast = simulatedNode(node.name, 'us-east-1b') as V1Node;
  const [key, value] = Object.entries(node.scheduling.nodeSelector)[0]!;
  onEast.metadata!.labels![key] = value;
  onEast.spec = { taints: [{ key, value, effect: 'NoSchedule' }] };
  await east.kube.core.createNode({ body: onEast });
  await waitFor(`node ${node.name} Ready on east`, 60_000, async () => {
    const n = await east.kube.core.readNode({ name: node.name });
    return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  });
  await startWorkersOnBoth(startWorkerProcess, east, west, eastCluster);
  connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  client = new Client({ connection });
}, 180_000);

afterAll(async () => {
  await connection?.close();
  await east.kube.core.deleteNode({ name: node.name }).catch(() => undefined);
  await deleteNamespace(east.kube, kube.ns);
});

/** A pod that asks for `gpus` GPUs on the file's node: what another model's replica takes there. */
function gpuTaker(name: string, gpus: number): V1Pod {
  return {
    metadata: { name },
    spec: {
      ...node.scheduling,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'c',
          image: 'busybox',
          resources: { limits: { 'nvidia.com/gpu': String(gpus) } },
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
}

/** The document: placed over `clusters`, `gpus` GPUs a replica, its pods on the file's node. */
const placedDoc = (name: string, clusters: string[], gpus: number) =>
  simulatedModelDoc(kube.ns, 'unused', name, '1s', (d) => {
    delete d.spec.cluster;
    d.spec.placement = { clusters };
    d.spec.resources = { gpus };
    d.spec.scheduling = node.scheduling;
  });

async function notServed(name: string, cluster: string): Promise<boolean> {
  try {
    await modelHandle(client, { cluster, namespace: kube.ns, name }).describe();
    return false;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
}

const deploymentOn = (c: Clients, name: string) =>
  c.apps.readNamespacedDeployment({ name, namespace: kube.ns }).catch(() => undefined);

describe('placement at start', { timeout: 300_000 }, () => {
  it("serves a placed model on the listed cluster that has room: west's GPUs taken, it lands on east", async () => {
    // Every GPU of the file's node on west is taken.
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: gpuTaker('takes-all', 4) });
    await waitFor('the GPU taker bound on west', 30_000, async () => {
      const pod = await kube.core.readNamespacedPod({ name: 'takes-all', namespace: kube.ns });
      return pod.spec?.nodeName === node.name;
    });

    const doc = placedDoc('placed', [west, eastCluster], 2);
    const served = expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'serve');
    const [why, line] = served.stdout.split('\n');
    expect(why).toBe(
      `placed on cluster ${eastCluster}: the most GPUs left after 1 replica × 2 GPUs: ` +
        `${west}: 0 GPUs free on 1 node (at most 0 on one), does not fit; ` +
        `${eastCluster}: 4 GPUs free on 1 node (at most 4 on one), 2 left after`,
    );
    expect(line).toBe(
      `serving placed (namespace ${kube.ns}, cluster ${eastCluster}): started workflow ` +
        `servedmodel/${eastCluster}/${kube.ns}/placed`,
    );
    // Served on east's control plane, by east's worker, as if the document had named it; nothing on west.
    const listed = await ferryJson<ModelSummary[]>(['list', '-A']);
    expect(listed.filter((m) => m.namespace === kube.ns).map((m) => [m.name, m.cluster, m.phase])).toEqual([
      ['placed', eastCluster, 'Ready'],
    ]);
    expect(await deploymentOn(east.kube, 'placed')).toBeDefined();
    expect(await deploymentOn(kube, 'placed')).toBeUndefined();
    expect(await notServed('placed', west)).toBe(true);
    // Its spec names the cluster chosen, and no placement: it never changes cluster.
    const spec = await queryModel(client, { cluster: eastCluster, namespace: kube.ns, name: 'placed' }, specQuery);
    expect(spec.spec.cluster).toBe(eastCluster);
    expect(spec.spec).not.toHaveProperty('placement');
    // The placement's own workflow, once in the model's life, on the first listed cluster's worker.
    const placement = client.workflow.getHandle(placeWorkflowIdFor({ namespace: kube.ns, name: 'placed' }));
    expect(await placement.describe()).toMatchObject({ taskQueue: `ferry-${west}`, status: { name: 'COMPLETED' } });

    // West has room again; an apply of the document goes to east all the same: placed once.
    await kube.core.deleteNamespacedPod({ name: 'takes-all', namespace: kube.ns, gracePeriodSeconds: 0 });
    doc.metadata.labels.team = 'chat';
    const file = writeDoc(doc);
    const applied = expectOk(await runFerry(['apply', '-f', file]), 'apply');
    expect(applied.stdout).toBe(
      `served on cluster ${eastCluster} already (placed when first served)\n` +
        `applied to ${kube.ns}/placed: generation 2: metadata.labels.team changed\n`,
    );
    expect(await notServed('placed', west)).toBe(true);
    // Diff compares the document with the model where it runs: nothing differs.
    expect(await runFerry(['diff', '-f', file])).toMatchObject({ code: 0, stdout: '' });
    // An update of the placed document goes there too (by the SDK: the prelude sends no early update for one).
    const updated = expectOk(await runFerry(['update', '-f', file]), 'update');
    expect(updated.stdout).toBe(`updated ${kube.ns}/placed: generation 2: no change\n`);
    placedFile = file;
  });

  it('refuses with NoCapacity when no listed cluster has room, naming what each has free, and creates nothing', async () => {
    // East's node has 2 GPUs left (the model above); west's 4; a cluster with no worker answers nothing.
    const nowhere = uniqueCluster('pl-nowhere');
    const doc = placedDoc('too-big', [west, nowhere, eastCluster], 5);
    const run = await runFerry(['serve', '-f', writeDoc(doc)]);
    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toBe(
      `error: NoCapacity: cannot place ${kube.ns}/too-big: no listed cluster has room for 1 replica × 5 GPUs: ` +
        `${west}: 4 GPUs free on 1 node (at most 4 on one), does not fit; ` +
        `${nowhere}: no answer (no worker of ferry-${nowhere} took the reading within 10 s); ` +
        `${eastCluster}: 2 GPUs free on 1 node (at most 2 on one), does not fit; nothing was created\n`,
    );
    for (const cluster of [west, nowhere, eastCluster]) expect(await notServed('too-big', cluster)).toBe(true);
    expect(await modelObjects(kube, kube.ns, 'too-big')).toEqual([]);
    expect(await modelObjects(east.kube, kube.ns, 'too-big')).toEqual([]);
    // The library says the same, as a typed error.
    const refused = await applyModel(client, placedDoc('too-big', [west, eastCluster], 5)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NoCapacityError);
    expect((refused as NoCapacityError).clusters.map((c) => c.cluster)).toEqual([west, eastCluster]);

    // `ferry delete -f` of the placed document deletes the model where it runs.
    const deleted = expectOk(await runFerry(['delete', '-f', placedFile, '--wait']), 'delete -f');
    expect(deleted.stdout).toMatch(new RegExp(`^deleted placed \\(namespace ${kube.ns}, cluster ${eastCluster}\\)`));
    expect(await deploymentOn(east.kube, 'placed')).toBeUndefined();
  });
});
