import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig';
import {
  adminKubeConfig,
  clientsFor,
  createNamespace,
  deleteNamespace,
  restrictedPod,
  statusOf,
  type Clients,
} from '../../support/kube';

let admin: Clients;
let restricted: string;
let other: string;

beforeAll(async () => {
  admin = clientsFor(adminKubeConfig());
  restricted = await createNamespace(admin, 'stack-restricted', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  other = await createNamespace(admin, 'stack-other');
});
afterAll(async () => {
  await deleteNamespace(admin, restricted);
  await deleteNamespace(admin, other);
});

describe('Pod Security admission', () => {
  it('rejects a root pod in a namespace that enforces "restricted"', async () => {
    const root = {
      metadata: { name: 'root' },
      spec: { containers: [{ name: 'main', image: 'registry.example/app:1', securityContext: { runAsUser: 0 } }] },
    };
    const err = await admin.core.createNamespacedPod({ namespace: restricted, body: root }).catch((e: unknown) => e);
    expect(statusOf(err)).toBe(403);
    const message = (JSON.parse(String((err as { body?: unknown }).body)) as { message: string }).message;
    expect(message).toMatch(/violates PodSecurity "restricted:latest"/);
    expect(message).toMatch(/runAsNonRoot != true/);
  });

  it('admits a pod that runs as non-root with no privileges', async () => {
    const pod = await admin.core.createNamespacedPod({ namespace: restricted, body: restrictedPod('compliant') });
    expect(pod.metadata?.uid).toBeTruthy();
  });
});

describe('a ServiceAccount bound to a namespaced Role', () => {
  it('may do what the Role allows in its namespace and is forbidden outside it', async () => {
    const ns = restricted;
    await admin.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'worker' } } });
    await admin.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'configmaps' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'create', 'delete'] }],
      },
    });
    await admin.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'worker-configmaps' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmaps' },
        subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace: ns }],
      },
    });
    const sa = clientsFor(await kubeConfigForServiceAccount(admin.kc, ns, 'worker'));

    const created = await sa.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'mine' } } });
    expect(created.metadata?.name).toBe('mine');

    const elsewhere = await sa.core.listNamespacedConfigMap({ namespace: other }).catch((e: unknown) => e);
    expect(statusOf(elsewhere)).toBe(403);
    const notGranted = await sa.core.listNamespacedSecret({ namespace: ns }).catch((e: unknown) => e);
    expect(statusOf(notGranted)).toBe(403);
  });
});
