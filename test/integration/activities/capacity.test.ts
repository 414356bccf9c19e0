// clusterCapacity against the local control plane's KWOK GPU nodes (four GPUs each): a pod bound to a node takes its
// GPUs off that node's free count, a cordoned node is not counted, and the node selector and GPU resource are honoured.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { activity } from '../../support/activity-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const env = useActivityEnv('act-capacity');
const GPU = 'nvidia.com/gpu';

const freeOn = async (node: string, input = { resource: GPU }) => {
  const reading = await activity(env.acts.clusterCapacity, input);
  return reading.nodes.find((n) => n.name === node);
};

const cordon = (name: string, unschedulable: boolean) =>
  env.cluster.mergePatch({ apiVersion: 'v1', kind: 'Node', name }, { spec: { unschedulable } });

function gpuPod(name: string, node: string, gpus: number): V1Pod {
  return {
    metadata: { name },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      containers: [{ name: 'c', image: 'busybox', resources: { limits: { [GPU]: String(gpus) } } }],
    },
  };
}

describe('clusterCapacity', () => {
  let cordoned: string | undefined;
  afterAll(async () => {
    if (cordoned) await cordon(cordoned, false);
  });

  it("reports each Ready GPU node's allocatable GPUs less what the pods bound to it ask for", async () => {
    const before = await activity(env.acts.clusterCapacity, { resource: GPU });
    expect(before.nodes.map((n) => n.name).sort()).toEqual(['gpu-node-a', 'gpu-node-b']);
    for (const node of before.nodes) expect(node.allocatable).toBe(4);
    const freeBefore = (await freeOn('gpu-node-a'))!.free;
    expect(freeBefore).toBeGreaterThanOrEqual(1);

    await env.core.createNamespacedPod({ namespace: env.ns, body: gpuPod('takes-one', 'gpu-node-a', 1) });
    await waitFor('the pod bound to gpu-node-a', 30_000, async () => {
      const pod = await env.core.readNamespacedPod({ name: 'takes-one', namespace: env.ns });
      return pod.spec?.nodeName === 'gpu-node-a';
    });
    expect((await freeOn('gpu-node-a'))!.free).toBe(freeBefore - 1);

    // Gone, it asks for nothing.
    await env.core.deleteNamespacedPod({ name: 'takes-one', namespace: env.ns, gracePeriodSeconds: 0 });
    await waitFor('the pod gone', 30_000, async () => {
      const pods = await env.core.listNamespacedPod({ namespace: env.ns });
      return pods.items.length === 0;
    });
    expect((await freeOn('gpu-node-a'))!.free).toBe(freeBefore);
  });

  it('leaves out a cordoned node, nodes off the selector, and nodes without the resource asked for', async () => {
    const selected = await activity(env.acts.clusterCapacity, {
      resource: GPU,
      nodeSelector: { 'topology.kubernetes.io/zone': 'us-east-1b' },
    });
    expect(selected.nodes.map((n) => n.name)).toEqual(['gpu-node-b']);
    expect((await activity(env.acts.clusterCapacity, { resource: 'amd.com/gpu' })).nodes).toEqual([]);

    cordoned = 'gpu-node-b';
    await cordon(cordoned, true);
    expect(await freeOn('gpu-node-b')).toBeUndefined();
    await cordon(cordoned, false);
    cordoned = undefined;
    expect(await freeOn('gpu-node-b')).toBeDefined();
  });
});
