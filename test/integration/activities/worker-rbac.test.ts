import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig.js';
import { createActivities } from '../../../activities/index.js';
import { apiKeyFromSecret } from '../../../activities/steps/health.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { EventRecorder } from '../../../activities/cluster/events.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { activity, testDeps, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { renderChart } from '../../support/helm.js';
import { waitFor } from '../../support/kube.js';
import { repoRoot } from '../../support/local-env.js';

// The worker's Helm chart (deploy/helm/ferry-worker) rendered with `helm template` and installed in the local
// cluster: its release namespace is one of this run's, labelled Pod Security "restricted" as the chart's README asks,
// and it serves one other namespace. The Role it binds there is enough for a model's whole life: every activity runs
// here as the worker's ServiceAccount, and the health check reaches the stand-in that the local supervisor started
// for the model's simulated engine pod.
const admin = useNamespace('act-role', RESTRICTED);
const system = useNamespace('act-ferry-system', RESTRICTED);
let cluster: Cluster;

beforeAll(async () => {
  const objects = admin.kc.makeApiClient(KubernetesObjectApi);
  const release = renderChart({
    release: 'ferry-worker',
    namespace: system.ns,
    values: { namespaces: [admin.ns], apiKeySecrets: { [admin.ns]: ['rbac-key'] } },
  });
  // The operator's namespace, not the chart's (`helm install --namespace … --create-namespace`).
  expect(release.filter((o) => o.kind === 'Namespace')).toEqual([]);
  for (const o of release) await objects.create(o);
  cluster = new Cluster(await kubeConfigForServiceAccount(admin.kc, system.ns, 'ferry-worker'));
});

describe("the chart's worker", () => {
  it('runs the worker Deployment under Pod Security "restricted" as its own ServiceAccount', async () => {
    const namespace = await admin.core.readNamespace({ name: system.ns });
    expect(namespace.metadata?.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    // The pods are simulated (KWOK): that they exist at all means admission accepted the pod template.
    const deployment = await waitFor('the worker Deployment Available', 60_000, async () => {
      const d = await admin.apps.readNamespacedDeployment({ name: 'ferry-worker', namespace: system.ns });
      const refused = d.status?.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
      if (refused) throw new Error(`the worker's pods are refused: ${refused.message}`);
      return d.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ? d : undefined;
    });
    expect(deployment.spec?.template.spec?.serviceAccountName).toBe('ferry-worker');
    const pods = await admin.core.listNamespacedPod({
      namespace: system.ns,
      labelSelector: 'app.kubernetes.io/name=ferry-worker',
    });
    // Two replicas by default (the chart's replicaCount), each as the worker's ServiceAccount.
    expect(pods.items.map((p) => p.spec?.serviceAccountName)).toEqual(['ferry-worker', 'ferry-worker']);
  });

  it('grants nothing outside the namespaces it serves, not even its own', async () => {
    const own = await cluster
      .apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'probe', namespace: system.ns } }, 'ferry')
      .catch((err: unknown) => err);
    expect(own).toMatchObject({ type: 'Forbidden' });
  });
});

describe("the chart's namespaced Role", () => {
  it('lets the worker read a keyed model’s key from the Secret listed in apiKeySecrets, and no other Secret', async () => {
    for (const name of ['rbac-key', 'other-key'])
      await admin.core.createNamespacedSecret({
        namespace: admin.ns,
        body: { metadata: { name }, stringData: { token: `${name}-value` } },
      });
    const keyOf = apiKeyFromSecret({ cluster });
    const keyed = (name: string) => testModel('keyed', admin.ns, { spec: { engine: { apiKeySecret: { name } } } });
    expect(await keyOf(keyed('rbac-key'))).toBe('rbac-key-value');
    expect(await keyOf(keyed('other-key'))).toBeUndefined();
    const other = await cluster
      .get({ apiVersion: 'v1', kind: 'Secret', name: 'other-key', namespace: admin.ns })
      .catch((err: unknown) => err);
    expect(other).toMatchObject({ type: 'Forbidden' });
  });

  it('is enough for claim, download, release, rollout, health, Events, status and teardown', async () => {
    const overrides = join(repoRoot, '.ferry/run/endpoints.json');
    const acts = createActivities({
      ...testDeps(),
      cluster,
      endpoints: overrideEndpoints(() => JSON.parse(readFileSync(overrides, 'utf8')) as Record<string, string>),
    });
    const model = testModel('scoped', admin.ns, {
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': '1s' },
      spec: { engine: { startupTimeout: '2m' } },
    });

    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(acts.applyStorage, input);
    const { jobName } = await activity(acts.startPuller, input);
    await activity(acts.awaitPuller, { model, jobName });
    await activity(acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash });
    const { generation } = await activity(acts.applyEngine, input);
    await activity(acts.awaitRollout, { model, generation });
    const health = await activity(acts.awaitHealth, { model });
    expect(health.models).toEqual(['scoped']);
    // The worker's Kubernetes Events on the root object (posted from the worker's side of the `ferry` sink).
    const refused: string[] = [];
    const events = new EventRecorder(
      cluster,
      (message, meta) => void refused.push(`${message} ${String(meta.error)}`),
      'rbac',
    );
    await events.record(
      { namespace: admin.ns, name: 'scoped', rootUid: claim.rootUid },
      { type: 'Normal', reason: 'Ready', message: 'serving scoped' },
    );
    await events.record(
      { namespace: admin.ns, name: 'scoped', rootUid: claim.rootUid },
      { type: 'Normal', reason: 'Ready', message: 'serving scoped' },
    );
    expect(refused).toEqual([]);
    const posted = await admin.core.listNamespacedEvent({
      namespace: admin.ns,
      fieldSelector: `involvedObject.uid=${claim.rootUid}`,
    });
    expect(posted.items.map((e) => [e.reason, e.count])).toEqual([['Ready', 2]]);
    expect(await activity(acts.readStatus, { model })).toMatchObject({ readyReplicas: 1 });
    expect(await activity(acts.scaleEngine, { model, replicas: 0 })).toBeUndefined();

    const teardown = await activity(acts.tearDown, { model });
    expect(teardown.deleted.sort()).toEqual(
      ['ConfigMap/scoped-ferry', 'Deployment/scoped', 'PersistentVolumeClaim/scoped-weights', 'Service/scoped'].sort(),
    );
  });
});

describe("the chart's placement ClusterRole (rbac.placement)", () => {
  it('is what clusterCapacity needs: without it the reading is Forbidden, with it the GPU nodes are read', async () => {
    const acts = createActivities({ ...testDeps(), cluster });
    const read = () => activity(acts.clusterCapacity, { resource: 'nvidia.com/gpu' });
    expect(await read().catch((err: unknown) => err)).toMatchObject({ type: 'Forbidden' });
    const placement = renderChart({
      release: 'ferry-worker',
      namespace: system.ns,
      values: { namespaces: [admin.ns], rbac: { create: true, placement: true } },
    }).filter((o) => o.kind?.startsWith('Cluster'));
    expect(placement.map((o) => o.kind)).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const objects = admin.kc.makeApiClient(KubernetesObjectApi);
    try {
      for (const o of placement) await objects.create(o);
      const reading = await waitFor('the reading allowed', 30_000, () => read());
      expect(reading.nodes.map((n) => n.name)).toEqual(expect.arrayContaining(['gpu-node-a', 'gpu-node-b']));
    } finally {
      for (const o of placement) await objects.delete(o).catch(() => undefined);
    }
  });
});
