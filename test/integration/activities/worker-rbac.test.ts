import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig';
import { createActivities } from '../../../activities';
import { Cluster } from '../../../activities/cluster/api';
import { overrideEndpoints } from '../../../activities/endpoints';
import { activity, testDeps, testModel } from '../../support/activity-env';
import { adminKubeConfig, clientsFor, createNamespace, deleteNamespace, type Clients } from '../../support/kube';
import { repoRoot } from '../../support/local-env';

// The Role Ferry ships (deploy/kubernetes/worker-rbac.yaml) is enough for a model's whole life: every activity runs
// here as the worker's ServiceAccount, and the health check reaches the stand-in that the local supervisor started
// for the model's simulated engine pod.
let admin: Clients;
let ns: string;
let cluster: Cluster;

beforeAll(async () => {
  admin = clientsFor(adminKubeConfig());
  ns = await createNamespace(admin, 'act-role', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  const text = readFileSync(join(repoRoot, 'deploy/kubernetes/worker-rbac.yaml'), 'utf8').replaceAll('NAMESPACE', ns);
  const objects = admin.kc.makeApiClient(KubernetesObjectApi);
  for (const doc of parseAllDocuments(text)) await objects.create(doc.toJS() as KubernetesObject);
  cluster = new Cluster(await kubeConfigForServiceAccount(admin.kc, ns, 'ferry-worker'));
});
afterAll(async () => deleteNamespace(admin, ns));

describe('the shipped namespaced Role', () => {
  it('is enough for claim, download, release, rollout, health, status and teardown', async () => {
    const overrides = join(repoRoot, '.ferry/run/endpoints.json');
    const acts = createActivities({
      ...testDeps(),
      cluster,
      endpoints: overrideEndpoints(() => JSON.parse(readFileSync(overrides, 'utf8')) as Record<string, string>),
    });
    const model = testModel('scoped', ns, {
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
