// Reads of one model's objects with their context: the engine as it is now (Deployment, newest ReplicaSet, pods),
// the Events of its pods and of its claim. What they mean is decided by the pure readers in ../readers/.
import type {
  CoreV1Event,
  KubernetesObject,
  V1Deployment,
  V1PersistentVolumeClaim,
  V1Pod,
  V1ReplicaSet,
} from '@kubernetes/client-node';
import type { ServedModel, Slot } from '../../workflows/contract/index.js';
import { deploymentName, selectorLabels, slotBase } from '../builders/index.js';
import { classifyPod, type PodProblem } from '../readers/pod-problems.js';
import { isPodReady, newestReplicaSet, POD_TEMPLATE_HASH, type EngineSnapshot } from '../readers/revision.js';
import { pendingVolumeProblem } from '../readers/volume.js';
import type { Cluster, ObjectRef } from './api.js';
import type { ModelWatcher } from './model-watcher.js';

/** What the reads need of the cluster: the API server, or the worker's watch in front of it. */
export type Reads = Pick<Cluster, 'get' | 'list'>;

/**
 * Reads from the worker's watch where it has the answer (the kinds it keeps, in a namespace it has listed), from the
 * API server otherwise (Events, field selectors, a namespace not yet watched).
 */
export function cachedReads(cluster: Cluster, watcher: ModelWatcher | undefined): Reads {
  if (!watcher) return cluster;
  return {
    async get<T extends KubernetesObject>(ref: ObjectRef): Promise<T | undefined> {
      const cached =
        ref.namespace && watcher.keeps(ref.kind) ? watcher.get<T>(ref.kind, ref.namespace, ref.name) : null;
      return cached === null ? cluster.get<T>(ref) : cached;
    },
    async list<T extends KubernetesObject>(
      apiVersion: string,
      kind: string,
      namespace: string,
      selectors: { labelSelector?: string; fieldSelector?: string } = {},
    ): Promise<T[]> {
      const cached =
        watcher.keeps(kind) && !selectors.fieldSelector
          ? watcher.list<T>(kind, namespace, selectors.labelSelector)
          : null;
      return cached ?? cluster.list<T>(apiVersion, kind, namespace, selectors);
    },
  };
}

/** `k=v,k=v` for a label map. */
export const labelSelectorOf = (labels: Record<string, string>): string =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

/**
 * What a wait on the engine watches: the Deployment, and the engine pods of every revision (of `slot`'s engine;
 * docs/design/rollout.md, section 2).
 */
export function engineWatches(model: ServedModel, slot?: Slot): { path: string; query: Record<string, string> }[] {
  const ns = model.metadata.namespace;
  const base = slotBase(model.metadata.name, slot);
  return [
    {
      path: `/apis/apps/v1/namespaces/${ns}/deployments`,
      query: { fieldSelector: `metadata.name=${deploymentName(base)}` },
    },
    { path: `/api/v1/namespaces/${ns}/pods`, query: { labelSelector: labelSelectorOf(selectorLabels(base)) } },
  ];
}

/** The engine (of `slot`) as it is now: Deployment, newest ReplicaSet, pods. */
export async function readEngine(cluster: Reads, model: ServedModel, slot?: Slot): Promise<EngineSnapshot> {
  const ns = model.metadata.namespace;
  const base = slotBase(model.metadata.name, slot);
  const labelSelector = labelSelectorOf(selectorLabels(base));
  const [deployment, replicaSets, pods] = await Promise.all([
    cluster.get<V1Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', name: deploymentName(base), namespace: ns }),
    cluster.list<V1ReplicaSet>('apps/v1', 'ReplicaSet', ns, { labelSelector }),
    cluster.list<V1Pod>('v1', 'Pod', ns, { labelSelector }),
  ]);
  const newest = deployment ? newestReplicaSet(deployment, replicaSets) : undefined;
  const hash = newest?.metadata?.labels?.[POD_TEMPLATE_HASH];
  const currentPods = hash
    ? pods.filter((p) => p.metadata?.labels?.[POD_TEMPLATE_HASH] === hash && !p.metadata?.deletionTimestamp)
    : [];
  return { deployment, newest, pods, currentPods };
}

/** Each current-revision pod's problem, with the Events of the pods that are not ready (Multi-Attach, mounts). */
export async function currentPodProblems(cluster: Reads, snapshot: EngineSnapshot): Promise<PodProblem[]> {
  const problems: PodProblem[] = [];
  for (const pod of snapshot.currentPods) {
    if (isPodReady(pod)) {
      // A ready pod may still have crashed since: its container status says so without Events.
      const problem = classifyPod(pod);
      if (problem) problems.push(problem);
      continue;
    }
    const problem = classifyPod(pod, await podEvents(cluster, pod));
    if (problem) problems.push(problem);
  }
  // Failures first, then waiting states.
  return problems.sort((a, b) => Number(a.waiting) - Number(b.waiting));
}

async function podEvents(cluster: Reads, pod: V1Pod): Promise<CoreV1Event[]> {
  const name = pod.metadata?.name;
  const ns = pod.metadata?.namespace;
  if (!name || !ns) return [];
  const events = await cluster.list<CoreV1Event>('v1', 'Event', ns, {
    fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${name}`,
  });
  // Events of an earlier pod of the same name are not this pod's.
  return events.filter((e) => !e.involvedObject?.uid || e.involvedObject.uid === pod.metadata?.uid);
}

/** Events about a claim; best effort (a Role without `events` access only loses detail). */
export async function volumeEvents(cluster: Reads, namespace: string, name: string): Promise<CoreV1Event[]> {
  return cluster
    .list<CoreV1Event>('v1', 'Event', namespace, {
      fieldSelector: `involvedObject.kind=PersistentVolumeClaim,involvedObject.name=${name}`,
    })
    .catch(() => []);
}

/** Why the claim is still Pending, or undefined when it is bound (or gone). */
export async function volumeProblem(cluster: Reads, namespace: string, name: string): Promise<PodProblem | undefined> {
  const pvc = await cluster.get<V1PersistentVolumeClaim>({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    name,
    namespace,
  });
  if (!pvc || (pvc.status?.phase ?? 'Pending') !== 'Pending') return undefined;
  return pendingVolumeProblem(name, await volumeEvents(cluster, namespace, name));
}
