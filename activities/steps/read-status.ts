// readStatus: one look at a Ready model, for runs from before lookAtModel (observeEngine is both looks' core):
// replicas, the worst problem by name, the endpoint; and, for a rollout's health gate, what the front's pods counted
// by revision. Problems in order: a current-revision pod that crash-loops, OOMs or cannot pull its image; replicas
// missing (ReplicasUnavailable); the engine not answering /health (Unhealthy).
import { FATAL_POD_REASONS } from '../readers/pod-problems.js';
import { clientEndpoint, type ActivityDeps } from '../deps.js';
import { probeEngine, type ApiKeyResolver } from './health.js';
import { assertOurs } from '../readers/ownership.js';
import { isPodReady } from '../readers/revision.js';
import type { V1Pod } from '@kubernetes/client-node';
import { currentPodProblems, labelSelectorOf, readEngine, type Reads } from '../cluster/model-reads.js';
import type {
  FrontCounters,
  ObservedStatus,
  ReadStatusInput,
  ServedModel,
  Slot,
} from '../../workflows/contract/index.js';
import { deploymentName, slotBase } from '../builders/index.js';
import { FRONT_METRICS_PORT, frontSelectorLabels } from '../builders/front-objects.js';
import { frontServers } from '../scaling/load.js';

/** How long a front pod's exporter has to answer. */
const FRONT_READ_TIMEOUT_MS = 5_000;
/** How long after an unreachable engine it is probed again (observeEngine). */
const SECOND_PROBE_AFTER_MS = 1_000;

export async function readStatus(
  deps: ActivityDeps,
  { model, slot, frontCounters }: ReadStatusInput,
  apiKeys?: ApiKeyResolver,
): Promise<ObservedStatus> {
  const observed = await observeEngine(deps, deps.cluster, model, apiKeys, slot);
  if (!frontCounters || !model.spec.front) return observed;
  return { ...observed, front: await readFrontCounters(deps, model) };
}

/** Each revision's counts, summed over the front's ready pods; why not, when a pod did not answer. */
async function readFrontCounters(deps: ActivityDeps, model: ServedModel): Promise<FrontCounters | { unread: string }> {
  const { name, namespace } = model.metadata;
  const pods = (
    await deps.cluster.list<V1Pod>('v1', 'Pod', namespace, {
      labelSelector: labelSelectorOf(frontSelectorLabels(name)),
    })
  ).filter((p) => isPodReady(p) && !p.metadata?.deletionTimestamp);
  if (pods.length === 0) return { unread: 'no front pod is ready' };
  const address = { metadata: { name, namespace }, spec: { engine: { port: FRONT_METRICS_PORT } } };
  const revisions: FrontCounters['revisions'] = {};
  for (const pod of pods) {
    const podName = pod.metadata!.name!;
    let text: string;
    try {
      const base = await deps.endpoints(address, { name: podName, ip: pod.status?.podIP });
      const res = await (deps.http ?? fetch)(`${base}/metrics`, { signal: AbortSignal.timeout(FRONT_READ_TIMEOUT_MS) });
      if (!res.ok) return { unread: `front pod ${podName} answered ${res.status} on /metrics` };
      text = await res.text();
    } catch (err) {
      return { unread: `front pod ${podName}: ${err instanceof Error ? err.message : String(err)}` };
    }
    for (const [revision, counts] of Object.entries(frontServers(text))) {
      const sum = (revisions[revision] ??= { requests: 0, answered: 0, failed: 0 });
      // The average over every pod, weighted by what each answered.
      if (counts.averageMs !== undefined && counts.answered > 0) {
        const before = (sum.averageMs ?? 0) * sum.answered;
        sum.averageMs = (before + counts.averageMs * counts.answered) / (sum.answered + counts.answered);
      }
      sum.requests += counts.requests;
      sum.answered += counts.answered;
      sum.failed += counts.failed;
    }
  }
  return { pods: pods.length, revisions };
}

/** The engine as it is, read through `reads` (the API server, or the worker's watch in front of it). */
export async function observeEngine(
  deps: ActivityDeps,
  reads: Reads,
  model: ServedModel,
  apiKeys?: ApiKeyResolver,
  slot?: Slot,
): Promise<ObservedStatus> {
  const snapshot = await readEngine(reads, model, slot);
  const deployment = assertOurs(model, snapshot.deployment);
  const endpoint = await clientEndpoint(deps.endpoints, model).catch(() => undefined);
  const at = (s: ObservedStatus): ObservedStatus => (endpoint ? { ...s, endpoint } : s);
  if (!deployment) {
    return at({
      replicas: 0,
      readyReplicas: 0,
      problem: {
        reason: 'EngineMissing',
        message: `Deployment ${model.metadata.namespace}/${deploymentName(slotBase(model.metadata.name, slot))} does not exist`,
      },
    });
  }
  const replicas = deployment.spec?.replicas ?? 1;
  // Ready replicas of the current revision only: an old revision's replica does not serve the current spec.
  const readyReplicas = snapshot.currentPods.filter(isPodReady).length;
  const problems = await currentPodProblems(reads, snapshot);
  const failing = problems.find((p) => FATAL_POD_REASONS.has(p.reason));
  if (failing) return at({ replicas, readyReplicas, problem: { reason: failing.reason, message: failing.message } });
  // A model that scales serves while its fewest replicas are ready: more on their way (starting, or waiting for a GPU)
  // are the autoscaler's business, and never make it Degraded.
  const needed = model.spec.scaling ? Math.min(replicas, model.spec.scaling.minReplicas) : replicas;
  if (readyReplicas < needed) {
    const why = problems[0] ? `; ${problems[0].message}` : '';
    return at({
      replicas,
      readyReplicas,
      problem: { reason: 'ReplicasUnavailable', message: `${readyReplicas} of ${replicas} replicas ready${why}` },
    });
  }
  if (replicas > 0) {
    const apiKey = model.spec.engine.apiKeySecret ? await apiKeys?.(model).catch(() => undefined) : undefined;
    const how = { apiKey, ...(slot ? { slot } : {}) };
    let probe = await probeEngine(deps, model, how);
    // A replica that has just gone (a scale-down, a pod deleted) may still be one of the Service's backends for a
    // moment: a connection it refuses is asked once more, a second later, before the model is called Unhealthy.
    if (!probe.ready && probe.state === 'Unreachable') {
      await new Promise((resolve) => setTimeout(resolve, SECOND_PROBE_AFTER_MS));
      probe = await probeEngine(deps, model, how);
    }
    if (!probe.ready) {
      return at({
        replicas,
        readyReplicas,
        problem: { reason: 'Unhealthy', message: `${probe.state}: ${probe.message}` },
      });
    }
  }
  return at({ replicas, readyReplicas });
}
