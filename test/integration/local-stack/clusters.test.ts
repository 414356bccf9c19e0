// Two clusters on one machine (`npm run local:up -- --clusters 2`): cluster east is a second Kubernetes control plane
// (its own API server over the same etcd under another prefix, controller-manager, scheduler, KWOK nodes and engine
// stand-in) with a worker of its own on task queue ferry-east, beside the stack's worker for cluster default. Real: both
// control planes, both worker processes, Temporal; simulated: KWOK's pods and the download.
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelSummary } from '../../../client/index.js';
import { expectOk, ferryJson, simulatedModelDoc, terminateModelsOf } from '../../support/e2e.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { clientsFor, deleteNamespace, waitFor, type Clients } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';

const eastConfig = readLocalEnv().KUBECONFIG_EAST;
const skipped = eastConfig
  ? ''
  : ' (skipped: the stack runs one cluster; `npm run local:up -- --clusters 2` adds east)';
const west = useNamespace('clusters', RESTRICTED);
let east: Clients;

beforeAll(async () => {
  if (!eastConfig) return;
  const kc = new KubeConfig();
  kc.loadFromFile(eastConfig);
  east = clientsFor(kc);
  // The same namespace on east: one model name in one namespace, once on each cluster.
  await east.core.createNamespace({ body: { metadata: { name: west.ns, labels: { ...RESTRICTED } } } });
  await waitFor(`ServiceAccount ${west.ns}/default on east`, 30_000, async () => {
    await east.core.readNamespacedServiceAccount({ name: 'default', namespace: west.ns });
    return true;
  });
});

afterAll(async () => {
  if (!eastConfig) return;
  await terminateModelsOf('east').catch(() => undefined);
  await deleteNamespace(east, west.ns);
});

const deployment = (c: Clients, name: string) =>
  c.apps.readNamespacedDeployment({ name, namespace: west.ns }).then(
    (d) => d,
    () => undefined,
  );

describe.skipIf(!eastConfig)(`two clusters on the local stack${skipped}`, { timeout: 300_000 }, () => {
  it('east is a control plane of its own: its own simulated GPU nodes, its objects apart from the first', async () => {
    const nodes = await east.core.listNode();
    const ready = nodes.items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    expect(ready.map((n) => n.status?.capacity?.['nvidia.com/gpu'])).toEqual(['4', '4']);
    await east.core.createNamespacedConfigMap({ namespace: west.ns, body: { metadata: { name: 'only-east' } } });
    await expect(west.core.readNamespacedConfigMap({ name: 'only-east', namespace: west.ns })).rejects.toThrow();
  });

  it("serves a model on each cluster by that cluster's worker; `ferry list -A` shows both; deleting one leaves the other", async () => {
    for (const cluster of ['default', 'east']) {
      const doc = simulatedModelDoc(west.ns, cluster, 'chat', '1s');
      expectOk(
        await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']),
        `ferry serve on ${cluster}`,
      );
    }
    const listed = await ferryJson<ModelSummary[]>(['list', '-A']);
    const ours = listed.filter((m) => m.namespace === west.ns);
    expect(ours.map((m) => [m.cluster, m.name, m.phase]).sort()).toEqual([
      ['default', 'chat', 'Ready'],
      ['east', 'chat', 'Ready'],
    ]);
    const table = expectOk(await runFerry(['list', '-A']), 'ferry list -A').stdout;
    expect(table).toMatch(new RegExp(`^${west.ns} +chat +default +Ready `, 'm'));
    expect(table).toMatch(new RegExp(`^${west.ns} +chat +east +Ready `, 'm'));
    // Each worker applied its model to its own control plane: two Deployments, one on each API server.
    const [onWest, onEast] = await Promise.all([deployment(west, 'chat'), deployment(east, 'chat')]);
    expect(onWest?.metadata?.uid).toBeDefined();
    expect(onEast?.metadata?.uid).toBeDefined();
    expect(onEast?.metadata?.uid).not.toBe(onWest?.metadata?.uid);

    expectOk(await runFerry(['delete', 'chat', '-n', west.ns, '--cluster', 'east', '--wait']), 'ferry delete on east');
    expect(await deployment(east, 'chat')).toBeUndefined();
    expect((await deployment(west, 'chat'))?.metadata?.uid).toBe(onWest?.metadata?.uid);
    const after = await ferryJson<ModelSummary[]>(['list', '-A']);
    expect(after.filter((m) => m.namespace === west.ns).map((m) => m.cluster)).toEqual(['default']);
    expectOk(await runFerry(['delete', 'chat', '-n', west.ns, '--cluster', 'default', '--wait']), 'ferry delete');
  });
});
