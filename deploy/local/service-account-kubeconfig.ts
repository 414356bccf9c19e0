// Yields a kubeconfig that authenticates as a ServiceAccount (a short-lived token from the TokenRequest API), for
// running Ferry's worker, or a test, with exactly the permissions of a namespaced Role.
//   node --import tsx deploy/local/service-account-kubeconfig.ts NAMESPACE NAME > sa.kubeconfig
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { pathToFileURL } from 'node:url';

export async function kubeConfigForServiceAccount(
  admin: KubeConfig,
  namespace: string,
  name: string,
  expirationSeconds = 3600,
): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const req = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds } },
  });
  const token = req.status?.token;
  if (!token) throw new Error(`the API server returned no token for ServiceAccount ${namespace}/${name}`);
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('the admin kubeconfig has no current cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: `${namespace}-${name}`, token }],
    contexts: [{ name: 'sa', cluster: cluster.name, user: `${namespace}-${name}`, namespace }],
    currentContext: 'sa',
  });
  return kc;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [namespace, name] = process.argv.slice(2);
  if (!namespace || !name) {
    console.error('usage: service-account-kubeconfig.ts NAMESPACE NAME');
    process.exit(2);
  }
  const admin = new KubeConfig();
  admin.loadFromDefault();
  const kc = await kubeConfigForServiceAccount(admin, namespace, name);
  process.stdout.write(kc.exportConfig());
}
