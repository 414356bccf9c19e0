// Creates what a fresh local cluster needs before Ferry can use it: KWOK's simulated GPU nodes, the default
// StorageClass that Ferry's KWOK provisioner stage serves, and the `models` namespace (Pod Security "restricted")
// with the Secrets the examples name. Idempotent (server-side apply), then waits until the nodes are Ready and the
// default ServiceAccounts exist (pods are rejected before they do).
import { randomBytes } from 'node:crypto';
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';

import { simulatedNode as node } from './simulated-node.js';

const FIELD_MANAGER = 'ferry-local-bootstrap';

/** The simulated nodes: two zones, four L40S GPUs each, labelled like the cloud instances they stand for. */
export const simulatedNodes = [
  { name: 'gpu-node-a', zone: 'us-east-1a' },
  { name: 'gpu-node-b', zone: 'us-east-1b' },
];

const storageClass: KubernetesObject = {
  apiVersion: 'storage.k8s.io/v1',
  kind: 'StorageClass',
  metadata: { name: 'kwok-volume', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
  // @ts-expect-error StorageClass fields live at the top level.
  provisioner: 'kwok.x-k8s.io/volume',
  reclaimPolicy: 'Delete',
  volumeBindingMode: 'Immediate',
};

/** The namespace the examples serve into; it enforces Pod Security "restricted", as a production one should. */
const examplesNamespace: KubernetesObject = {
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: {
    name: 'models',
    labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/warn': 'restricted' },
  },
};

/** Secrets the examples refer to, created once with random values (a local cluster has no real Hugging Face token). */
async function ensureExampleSecrets(core: CoreV1Api): Promise<void> {
  for (const name of ['qwen-api-key', 'hf-token']) {
    const exists = await core.readNamespacedSecret({ name, namespace: 'models' }).then(
      () => true,
      () => false,
    );
    if (exists) continue;
    await core.createNamespacedSecret({
      namespace: 'models',
      body: { metadata: { name }, stringData: { token: randomBytes(24).toString('base64url') } },
    });
  }
}

async function until(what: string, seconds: number, probe: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out after ${seconds}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function main(): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const objects = kc.makeApiClient(KubernetesObjectApi);
  const core = kc.makeApiClient(CoreV1Api);

  for (const obj of [storageClass, examplesNamespace, ...simulatedNodes.map((n) => node(n.name, n.zone))]) {
    await objects.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
  await until('simulated nodes to be Ready', 60, async () => {
    const nodes = await core.listNode();
    const ready = nodes.items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    return ready.length >= simulatedNodes.length;
  });
  await until('the default ServiceAccount', 60, async () => {
    await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
    return true;
  });
  await until('the default ServiceAccount of namespace models', 60, async () => {
    await core.readNamespacedServiceAccount({ name: 'default', namespace: 'models' });
    return true;
  });
  await ensureExampleSecrets(core);
  console.error(`[ferry-local] ${simulatedNodes.length} simulated GPU nodes Ready, default StorageClass kwok-volume`);
}

await main();
