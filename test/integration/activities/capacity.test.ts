// clusterCapacity against the local control plane's KWOK nodes (four GPUs each): a pod bound to a node takes its GPUs
// off that node's free count, a cordoned node is not counted, and the node selector, taints and GPU resource are
// honoured. On a node of the file's own (labelled and tainted): the tests beside these take and free GPUs on the
// shared nodes at any moment, and a cordoned shared node would leave their pods unschedulable.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import type { ClusterCapacityInput } from '../../../workflows/contract/index.js';
import { activity } from '../../support/activity-env.js';
import { useActivityEnv, useOwnNode } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const env = useActivityEnv('act-capacity');
const node = useOwnNode();
const GPU = 'nvidia.com/gpu';
/** What a model whose pods go to the file's node asks about: its selector, and the toleration of its taint. */
const onOwnNode: ClusterCapacityInput = {
  resource: GPU,
  nodeSelector: node.scheduling.nodeSelector,
  tolerations: [{ key: 'ferry.dev/test-node', operator: 'Equal', value: node.name, effect: 'NoSchedule' }],
};

const freeOn = async (name: string, input = onOwnNode) => {
  const reading = await activity(env.acts.clusterCapacity, input);
  return reading.nodes.find((n) => n.name === name);
};

const cordon = (name: string, unschedulable: boolean) =>
  env.cluster.mergePatch({ apiVersion: 'v1', kind: 'Node', name }, { spec: { unschedulable } });

function gpuPod(name: string, gpus: number): V1Pod {
  return {
    metadata: { name },
    spec: {
      ...node.scheduling,
      containers: [{ name: 'c', image: 'busybox', resources: { limits: { [GPU]: String(gpus) } } }],
    },
  };
}

describe('clusterCapacity', () => {
  let cordoned = false;
  afterAll(async () => {
    if (cordoned) await cordon(node.name, false);
  });

  it("reports each Ready GPU node's allocatable GPUs less what the pods bound to it ask for", async () => {
    // Without the toleration the file's node is not the model's to use; the shared GPU nodes are.
    const shared = await activity(env.acts.clusterCapacity, { resource: GPU });
    expect(shared.nodes.map((n) => n.name)).toEqual(expect.arrayContaining(['gpu-node-a', 'gpu-node-b']));
    expect(shared.nodes.map((n) => n.name)).not.toContain(node.name);
    for (const n of shared.nodes) expect(n.allocatable).toBe(4);

    const reading = await activity(env.acts.clusterCapacity, onOwnNode);
    expect(reading.nodes).toEqual([{ name: node.name, allocatable: 4, free: 4 }]);

    await env.core.createNamespacedPod({ namespace: env.ns, body: gpuPod('takes-three', 3) });
    await waitFor(`the pod bound to ${node.name}`, 30_000, async () => {
      const pod = await env.core.readNamespacedPod({ name: 'takes-three', namespace: env.ns });
      return pod.spec?.nodeName === node.name;
    });
    expect(await freeOn(node.name)).toEqual({ name: node.name, allocatable: 4, free: 1 });

    // Gone, it asks for nothing.
    await env.core.deleteNamespacedPod({ name: 'takes-three', namespace: env.ns, gracePeriodSeconds: 0 });
    await waitFor('the pod gone', 30_000, async () => {
      const pods = await env.core.listNamespacedPod({ namespace: env.ns });
      return pods.items.length === 0;
    });
    expect((await freeOn(node.name))!.free).toBe(4);
  });

  it('leaves out a cordoned node, nodes off the selector, and nodes without the resource asked for', async () => {
    const selected = await activity(env.acts.clusterCapacity, {
      resource: GPU,
      nodeSelector: { 'topology.kubernetes.io/zone': 'us-east-1b' },
    });
    expect(selected.nodes.map((n) => n.name)).toEqual(['gpu-node-b']);
    expect((await activity(env.acts.clusterCapacity, { ...onOwnNode, resource: 'amd.com/gpu' })).nodes).toEqual([]);

    cordoned = true;
    await cordon(node.name, true);
    expect(await freeOn(node.name)).toBeUndefined();
    await cordon(node.name, false);
    cordoned = false;
    expect(await freeOn(node.name)).toBeDefined();
  });
});
