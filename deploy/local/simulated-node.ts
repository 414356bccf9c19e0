// A KWOK node that stands for a cloud GPU instance: four L40S GPUs, 110 pods. bootstrap.ts creates two; the
// benchmarks create more (bench/lib.ts). KWOK manages nodes with the annotation kwok.x-k8s.io/node=fake.
import type { KubernetesObject } from '@kubernetes/client-node';

/** The Node object, with the status its kubelet would report. */
export function simulatedNode(name: string, zone: string): KubernetesObject {
  const capacity = { cpu: '32', memory: '256Gi', pods: '110', 'nvidia.com/gpu': '4', 'ephemeral-storage': '1Ti' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'node.kubernetes.io/instance-type': 'g6e.12xlarge',
        'topology.kubernetes.io/region': 'us-east-1',
        'topology.kubernetes.io/zone': zone,
        'nvidia.com/gpu.present': 'true',
        'nvidia.com/gpu.product': 'NVIDIA-L40S',
        'nvidia.com/gpu.count': '4',
        type: 'kwok',
      },
    },
    // @ts-expect-error KubernetesObject has no status; a Node is created with the status its kubelet reports.
    status: {
      capacity,
      allocatable: capacity,
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        kubeletVersion: 'kwok',
        kubeProxyVersion: 'kwok',
        containerRuntimeVersion: 'kwok',
        kernelVersion: '',
        osImage: '',
        bootID: '',
        machineID: '',
        systemUUID: '',
      },
    },
  };
}
