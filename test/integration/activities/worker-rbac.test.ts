import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig.js';
import { createActivities } from '../../../activities/index.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { activity, testDeps, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { repoRoot } from '../../support/local-env.js';

// The manifests Ferry ships, applied to the local cluster: deploy/kubernetes/worker.yaml (the worker's namespace,
// ServiceAccount and Deployment) in a namespace of its own, and deploy/kubernetes/worker-rbac.yaml in the models'
// namespace. The Role is enough for a model's whole life: every activity runs here as the worker's ServiceAccount,
// and the health check reaches the stand-in that the local supervisor started for the model's simulated engine pod.
/** A shipped manifest's documents, with its namespaces renamed to this run's. */
function manifest(file: string, names: Record<string, string>): KubernetesObject[] {
  let text = readFileSync(join(repoRoot, 'deploy/kubernetes', file), 'utf8');
  for (const [from, to] of Object.entries(names)) text = text.replaceAll(from, to);
  return parseAllDocuments(text).map((doc) => doc.toJS() as KubernetesObject);
}

const admin = useNamespace('act-role', RESTRICTED);
// The worker's own namespace, with the labels its manifest gives it.
const system = useNamespace(
  'act-ferry-system',
  manifest('worker.yaml', {}).find((o) => o.kind === 'Namespace')!.metadata?.labels,
);
let cluster: Cluster;

beforeAll(async () => {
  const objects = admin.kc.makeApiClient(KubernetesObjectApi);
  for (const o of manifest('worker.yaml', { 'ferry-system': system.ns })) {
    if (o.kind !== 'Namespace') await objects.create(o);
  }
  for (const o of manifest('worker-rbac.yaml', { NAMESPACE: admin.ns, 'ferry-system': system.ns })) {
    await objects.create(o);
  }
  cluster = new Cluster(await kubeConfigForServiceAccount(admin.kc, system.ns, 'ferry-worker'));
});

describe('the shipped worker manifest', () => {
  it('runs the worker Deployment under Pod Security "restricted" as its own ServiceAccount', async () => {
    expect(manifest('worker.yaml', {}).find((o) => o.kind === 'Namespace')?.metadata?.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
    });
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
    expect(pods.items.map((p) => p.spec?.serviceAccountName)).toEqual(['ferry-worker']);
  });

  it('grants nothing outside the namespaces bound by worker-rbac.yaml, not even its own', async () => {
    const own = await cluster
      .apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'probe', namespace: system.ns } }, 'ferry')
      .catch((err: unknown) => err);
    expect(own).toMatchObject({ type: 'Forbidden' });
  });
});

describe('the shipped namespaced Role', () => {
  it('is enough for claim, download, release, rollout, health, status and teardown', async () => {
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
    expect(await activity(acts.readStatus, { model })).toMatchObject({ readyReplicas: 1 });
    expect(await activity(acts.scaleEngine, { model, replicas: 0 })).toBeUndefined();

    const teardown = await activity(acts.tearDown, { model });
    expect(teardown.deleted.sort()).toEqual(
      ['ConfigMap/scoped-ferry', 'Deployment/scoped', 'PersistentVolumeClaim/scoped-weights', 'Service/scoped'].sort(),
    );
  });
});
