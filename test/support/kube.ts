import { randomBytes } from 'node:crypto';
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
  type V1Pod,
} from '@kubernetes/client-node';
import { kubeConfigForServiceAccount } from '../../deploy/local/service-account-kubeconfig.js';
import { readLocalEnv } from './local-env.js';

/** The local cluster's admin credentials, from `.ferry/local.env`. */
export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(readLocalEnv().KUBECONFIG);
  return kc;
}

export interface Clients {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  batch: BatchV1Api;
  discovery: DiscoveryV1Api;
  rbac: RbacAuthorizationV1Api;
}

export function clientsFor(kc: KubeConfig): Clients {
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    batch: kc.makeApiClient(BatchV1Api),
    discovery: kc.makeApiClient(DiscoveryV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
  };
}

/** A fresh namespace per test file, so files run in parallel without seeing each other's objects. */
export async function createNamespace(
  c: Clients,
  prefix: string,
  labels: Record<string, string> = {},
): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await c.core.createNamespace({ body: { metadata: { name, labels: { 'ferry.dev/test': 'true', ...labels } } } });
  // Pods are refused until the namespace's default ServiceAccount exists.
  await waitFor(`ServiceAccount ${name}/default`, 30_000, async () => {
    await c.core.readNamespacedServiceAccount({ name: 'default', namespace: name });
    return true;
  });
  return name;
}

export async function deleteNamespace(c: Clients, name: string): Promise<void> {
  await c.core.deleteNamespace({ name }).catch(() => undefined);
}

/**
 * Creates ServiceAccount `account` in `namespace`, bound to a new Role `role` there with `rules`, and returns a
 * kubeconfig that authenticates as it: what a worker with namespaced rights would hold.
 */
export async function serviceAccountWithRole(
  c: Clients,
  namespace: string,
  account: string,
  role: string,
  rules: V1PolicyRule[],
): Promise<KubeConfig> {
  await c.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: account } } });
  await c.rbac.createNamespacedRole({ namespace, body: { metadata: { name: role }, rules } });
  await c.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
    },
  });
  return kubeConfigForServiceAccount(c.kc, namespace, account);
}

/** Polls `probe` until it returns a truthy value, which is returned; throws with `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined | false>,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last instanceof Error ? last.message : JSON.stringify(last)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The HTTP status of a failed client-node call, or undefined when it did not fail that way. */
export function statusOf(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? Number(err.code) : undefined;
}

/** A pod spec that passes Pod Security "restricted". */
export function restrictedPod(name: string, extra: Partial<V1Pod['spec']> = {}): V1Pod {
  return {
    metadata: { name },
    spec: {
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 2000,
        runAsGroup: 0,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'main',
          image: 'registry.example/app:1',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
      ...extra,
    },
  };
}
