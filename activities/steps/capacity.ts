// clusterCapacity: this cluster's free GPUs for placement at start (docs/design/fleet.md, §3). Two list requests,
// once per placement: the nodes, and the pods of every namespace that are bound and have not ended. The watch's
// caches hold neither.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { CapacityReading, ClusterCapacityInput } from '../../workflows/contract/index.js';
import type { ActivityDeps } from '../deps.js';
import { nodeCapacities } from '../readers/capacity.js';

const NOT_ENDED = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';

export async function clusterCapacity(deps: ActivityDeps, input: ClusterCapacityInput): Promise<CapacityReading> {
  const [nodes, pods] = await Promise.all([
    deps.cluster.list<V1Node>('v1', 'Node', ''),
    deps.cluster.list<V1Pod>('v1', 'Pod', '', { fieldSelector: NOT_ENDED }),
  ]);
  return { nodes: nodeCapacities(nodes, pods, input) };
}
