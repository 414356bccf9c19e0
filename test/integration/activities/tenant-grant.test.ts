// checkTenantGrant against the local control plane (docs/security.md): a tenant's grant allows Secrets and PVCs by
// their labels, and the worker of the model's cluster reads those labels — as the worker's ServiceAccount, under the
// Role the chart renders for that grant (get on Secrets only in the tenant's namespaces) — before anything is created.
import { KubernetesObjectApi, type V1Role } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { createActivities } from '../../../activities/create-activities.js';
import type { FerryActivities } from '../../../workflows/contract/index.js';
import { grantsInCluster } from '../../../worker/grants-in-cluster.js';
import { parseTenants } from '../../../worker/tenants.js';
import { activity, rejectionOf, testDeps } from '../../support/activity-env.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { renderChart } from '../../support/helm.js';

const served = useNamespace('act-grant', RESTRICTED);
const other = useNamespace('act-grant-other', RESTRICTED);
const system = useNamespace('act-grant-system', RESTRICTED);
let acts: FerryActivities;

const LABEL = { 'ferry.dev/tenant': 'team-a' };

beforeAll(async () => {
  const tenants = {
    'team-a': {
      nexusTaskQueue: 'ferry-nexus-team-a',
      clusters: ['test'],
      namespaces: [served.ns],
      images: { repositories: ['vllm/vllm-openai:'] },
      gpus: { perModel: 4, total: 4 },
      secrets: ['hf-listed', { matchLabels: LABEL }],
      pvcs: [{ matchLabels: LABEL }],
    },
  };
  const release = renderChart({
    release: 'ferry-worker',
    namespace: system.ns,
    values: { namespaces: [served.ns, other.ns], tenants },
  });
  // The Role lets the worker get Secrets where a grant names them by label, and nowhere else.
  const roles = release.filter((o): o is V1Role => o.kind === 'Role');
  const secretsRule = (ns: string) =>
    roles
      .find((r) => r.metadata?.namespace === ns)!
      .rules!.filter((r) => r.resources?.includes('secrets') && !r.resourceNames);
  expect(secretsRule(served.ns)).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }]);
  expect(secretsRule(other.ns)).toEqual([]);
  const objects = served.kc.makeApiClient(KubernetesObjectApi);
  for (const o of release.filter((r) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(r.kind!))) {
    await objects.create(o);
  }
  const secret = (name: string, labels: Record<string, string>) =>
    served.core.createNamespacedSecret({
      namespace: served.ns,
      body: { metadata: { name, labels }, stringData: { token: 'hf_not_a_real_token' } },
    });
  await secret('hf-labelled', LABEL);
  await secret('hf-other-team', { 'ferry.dev/tenant': 'team-b' });
  await served.core.createNamespacedPersistentVolumeClaim({
    namespace: served.ns,
    body: {
      metadata: { name: 'checkpoints', labels: LABEL },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    },
  });
  const cluster = new Cluster(await kubeConfigForServiceAccount(served.kc, system.ns, 'ferry-worker'));
  // The worker's file lets team-a into the other namespace too, where the chart's Role (rendered without it) grants
  // no Secrets: what a worker whose Role lags its tenants file meets.
  const file = { tenants: { 'team-a': { ...tenants['team-a'], namespaces: [served.ns, other.ns] } } };
  acts = createActivities({ ...testDeps(), cluster, grants: grantsInCluster(parseTenants(file), cluster) });
});

/** A document as a tenant sends it: its token Secret, or its weights on a PVC. */
const document = (tokenSecret: string, claim?: string, namespace = served.ns) => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen', namespace },
  spec: {
    cluster: 'test',
    source: claim
      ? { pvc: { claimName: claim, path: 'qwen' } }
      : { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', tokenSecret: { name: tokenSecret, key: 'token' } } },
  },
});

describe('checkTenantGrant', () => {
  it('allows a Secret or PVC the grant lists, or whose labels match its selector', async () => {
    for (const doc of [document('hf-listed'), document('hf-labelled'), document('', 'checkpoints')]) {
      await expect(activity(acts.checkTenantGrant, { tenant: 'team-a', document: doc })).resolves.toBeUndefined();
    }
  });

  it('refuses, Forbidden, a Secret whose labels do not match, or that does not exist', async () => {
    const mismatched = await rejectionOf(
      activity(acts.checkTenantGrant, { tenant: 'team-a', document: document('hf-other-team') }),
    );
    expect(mismatched).toMatchObject({
      type: 'Forbidden',
      nonRetryable: true,
      message:
        'tenant team-a may not read Secret hf-other-team (source.huggingface.tokenSecret): it is not listed, and its labels match none of "ferry.dev/tenant=team-a"',
    });
    const missing = await rejectionOf(
      activity(acts.checkTenantGrant, { tenant: 'team-a', document: document('hf-nowhere') }),
    );
    expect(missing.message).toBe(
      `tenant team-a may not read Secret hf-nowhere (source.huggingface.tokenSecret): it is not listed, and there is no such Secret in namespace ${served.ns} whose labels could allow it`,
    );
  });

  it('refuses what it may not read the labels of, naming why, instead of failing the step', async () => {
    const refused = await rejectionOf(
      activity(acts.checkTenantGrant, { tenant: 'team-a', document: document('hf-labelled', undefined, other.ns) }),
    );
    expect(refused).toMatchObject({ type: 'Forbidden', nonRetryable: true });
    expect(refused.message).toMatch(
      /^tenant team-a's grant allows objects by label, and this worker may not read them: reading the labels of Secret .*forbidden/,
    );
  });

  it('refuses every tenant on a worker without a tenants file, and a tenant the file does not name', async () => {
    const bare = createActivities(testDeps());
    const refused = await rejectionOf(
      activity(bare.checkTenantGrant, { tenant: 'team-a', document: document('hf-listed') }),
    );
    expect(refused).toMatchObject({ type: 'Forbidden' });
    expect(refused.message).toBe(
      "the worker of cluster test has no tenants file: it cannot check tenant team-a's grant",
    );
    const stranger = await rejectionOf(
      activity(acts.checkTenantGrant, { tenant: 'team-z', document: document('hf-listed') }),
    );
    expect(stranger.message).toBe("tenant team-z has no grant in this worker's tenants file");
  });
});
