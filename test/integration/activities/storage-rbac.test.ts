import type { V1PolicyRule } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig';
import { Cluster } from '../../../activities/cluster/api';
import { pvcName } from '../../../activities/builders';
import { createActivities } from '../../../activities/create-activities';
import { activity, testDeps, testModel } from '../../support/activity-env';
import {
  adminKubeConfig,
  clientsFor,
  createNamespace,
  deleteNamespace,
  waitFor,
  type Clients,
} from '../../support/kube';

// The storage activities need no cluster-wide rights: a namespaced Role with these rules is enough for a whole download
// (claim, volume, puller, release) and for handling our own volume stuck terminating.
const STORAGE_ACTIVITY_RULES: V1PolicyRule[] = [
  { apiGroups: [''], resources: ['configmaps', 'services'], verbs: ['get', 'create', 'patch'] },
  { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
  { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
  { apiGroups: [''], resources: ['events'], verbs: ['list'] },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'] },
];

let admin: Clients;
let ns: string;
let cluster: Cluster;

beforeAll(async () => {
  admin = clientsFor(adminKubeConfig());
  ns = await createNamespace(admin, 'act-rbac', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  await admin.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'ferry-worker' } } });
  await admin.rbac.createNamespacedRole({
    namespace: ns,
    body: { metadata: { name: 'ferry-storage' }, rules: STORAGE_ACTIVITY_RULES },
  });
  await admin.rbac.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'ferry-storage' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'ferry-storage' },
      subjects: [{ kind: 'ServiceAccount', name: 'ferry-worker', namespace: ns }],
    },
  });
  cluster = new Cluster(await kubeConfigForServiceAccount(admin.kc, ns, 'ferry-worker'));
});
afterAll(async () => deleteNamespace(admin, ns));

describe('as a ServiceAccount with a namespaced Role', () => {
  it('downloads from claim to released volume', async () => {
    const acts = createActivities({ ...testDeps(), cluster });
    const model = testModel('scoped', ns);
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    expect(await activity(acts.applyStorage, input)).toMatchObject({ phase: 'Bound', holdsSource: false });
    const { jobName } = await activity(acts.startPuller, input);
    await activity(acts.awaitPuller, { model, jobName });
    await activity(acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash });
    expect(await activity(acts.applyStorage, input)).toMatchObject({ holdsSource: true });
  });

  it('lets go of its own volume stuck terminating', async () => {
    const acts = createActivities({ ...testDeps(), cluster });
    const model = testModel('scoped-stuck', ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(acts.applyStorage, input);
    const { jobName } = await activity(acts.startPuller, input);
    await waitFor('the puller running', 30_000, async () => {
      const pods = await admin.core.listNamespacedPod({ namespace: ns, labelSelector: `job-name=${jobName}` });
      return pods.items.some((p) => p.status?.phase === 'Running');
    });
    await admin.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName('scoped-stuck'), namespace: ns });
    expect((await activity(acts.claimName, { model })).rootUid).toBe(claim.rootUid);
  });
});
