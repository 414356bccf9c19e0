// A cluster's free GPUs, node by node, from its nodes and pods (placement at start, docs/design/fleet.md §3). Pure.
import type { V1Container, V1Node, V1Pod, V1Taint } from '@kubernetes/client-node';
import {
  parseQuantity,
  type ClusterCapacityInput,
  type NodeCapacity,
  type Toleration,
} from '../../workflows/contract/index.js';

/**
 * Each node a replica could be scheduled on (Ready, not cordoned, matching the selector, no NoSchedule or NoExecute
 * taint left untolerated, some of the resource allocatable) with its allocatable amount less what the pods bound to
 * it ask for. `pods` are those that have not ended (the caller leaves out Succeeded and Failed).
 */
export function nodeCapacities(nodes: V1Node[], pods: V1Pod[], input: ClusterCapacityInput): NodeCapacity[] {
  const asked = new Map<string, number>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    const phase = pod.status?.phase;
    if (!node || phase === 'Succeeded' || phase === 'Failed') continue;
    asked.set(node, (asked.get(node) ?? 0) + podRequest(pod, input.resource));
  }
  return nodes.flatMap((node): NodeCapacity[] => {
    const name = node.metadata?.name ?? '';
    const allocatable = amount(node.status?.allocatable?.[input.resource]);
    if (allocatable <= 0 || !usable(node, input)) return [];
    return [{ name, allocatable, free: Math.max(0, allocatable - (asked.get(name) ?? 0)) }];
  });
}

function usable(node: V1Node, { nodeSelector = {}, tolerations = [] }: ClusterCapacityInput): boolean {
  const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const labels = node.metadata?.labels ?? {};
  return (
    ready &&
    node.spec?.unschedulable !== true &&
    Object.entries(nodeSelector).every(([key, value]) => labels[key] === value) &&
    (node.spec?.taints ?? []).every((taint) => taint.effect === 'PreferNoSchedule' || tolerated(taint, tolerations))
  );
}

/** As the scheduler matches a toleration with a taint: the key (empty with Exists: any), the value, the effect. */
function tolerated(taint: V1Taint, tolerations: readonly Toleration[]): boolean {
  return tolerations.some((t) => {
    const operator = t.operator ?? 'Equal';
    if (t.effect !== undefined && t.effect !== taint.effect) return false;
    if (!t.key) return operator === 'Exists';
    if (t.key !== taint.key) return false;
    return operator === 'Exists' || (t.value ?? '') === (taint.value ?? '');
  });
}

/** What a pod asks of the resource: its containers together, or its largest init container, whichever is more. */
function podRequest(pod: V1Pod, resource: string): number {
  const of = (c: V1Container) => amount(c.resources?.requests?.[resource] ?? c.resources?.limits?.[resource]);
  const running = (pod.spec?.containers ?? []).reduce((sum, c) => sum + of(c), 0);
  const init = Math.max(0, ...(pod.spec?.initContainers ?? []).map(of));
  return Math.max(running, init);
}

function amount(value: string | undefined): number {
  return value === undefined ? 0 : (parseQuantity(value) ?? 0);
}
