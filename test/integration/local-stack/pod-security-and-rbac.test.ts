import { describe, expect, it } from 'vitest';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { clientsFor, restrictedPod, serviceAccountWithRole, statusOf } from '../../support/kube.js';

// The admin's clients; `admin.ns` enforces "restricted", `other.ns` is where the ServiceAccount has no rights.
const admin = useNamespace('stack-restricted', RESTRICTED);
const other = useNamespace('stack-other');

describe('Pod Security admission', () => {
  it('rejects a root pod in a namespace that enforces "restricted"', async () => {
    const root = {
      metadata: { name: 'root' },
      spec: { containers: [{ name: 'main', image: 'registry.example/app:1', securityContext: { runAsUser: 0 } }] },
    };
    const err = await admin.core.createNamespacedPod({ namespace: admin.ns, body: root }).catch((e: unknown) => e);
    expect(statusOf(err)).toBe(403);
    const message = (JSON.parse(String((err as { body?: unknown }).body)) as { message: string }).message;
    expect(message).toMatch(/violates PodSecurity "restricted:latest"/);
    expect(message).toMatch(/runAsNonRoot != true/);
  });

  it('admits a pod that runs as non-root with no privileges', async () => {
    const pod = await admin.core.createNamespacedPod({ namespace: admin.ns, body: restrictedPod('compliant') });
    expect(pod.metadata?.uid).toBeTruthy();
  });
});

describe('a ServiceAccount bound to a namespaced Role', () => {
  it('may do what the Role allows in its namespace and is forbidden outside it', async () => {
    const ns = admin.ns;
    const sa = clientsFor(
      await serviceAccountWithRole(admin, ns, 'worker', 'configmaps', [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'create', 'delete'] },
      ]),
    );

    const created = await sa.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'mine' } } });
    expect(created.metadata?.name).toBe('mine');

    const elsewhere = await sa.core.listNamespacedConfigMap({ namespace: other.ns }).catch((e: unknown) => e);
    expect(statusOf(elsewhere)).toBe(403);
    const notGranted = await sa.core.listNamespacedSecret({ namespace: ns }).catch((e: unknown) => e);
    expect(statusOf(notGranted)).toBe(403);
  });
});
