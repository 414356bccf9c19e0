import type { V1PolicyRule } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../../activities/cluster/api.js';
import { pvcName } from '../../../activities/builders/index.js';
import { createActivities } from '../../../activities/create-activities.js';
import { activity, testDeps, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { serviceAccountWithRole, waitFor } from '../../support/kube.js';

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

const admin = useNamespace('act-rbac', RESTRICTED);
let cluster: Cluster;

beforeAll(async () => {
  cluster = new Cluster(
    await serviceAccountWithRole(admin, admin.ns, 'ferry-worker', 'ferry-storage', STORAGE_ACTIVITY_RULES),
  );
});

describe('as a ServiceAccount with a namespaced Role', () => {
  it('downloads from claim to released volume', async () => {
    const acts = createActivities({ ...testDeps(), cluster });
    const model = testModel('scoped', admin.ns);
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
    const model = testModel('scoped-stuck', admin.ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(acts.applyStorage, input);
    const { jobName } = await activity(acts.startPuller, input);
    await waitFor('the puller running', 30_000, async () => {
      const pods = await admin.core.listNamespacedPod({ namespace: admin.ns, labelSelector: `job-name=${jobName}` });
      return pods.items.some((p) => p.status?.phase === 'Running');
    });
    await admin.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName('scoped-stuck'), namespace: admin.ns });
    expect((await activity(acts.claimName, { model })).rootUid).toBe(claim.rootUid);
  });
});
