// Which engine pods run the Deployment's *current* spec, and whether that spec has rolled out (kubectl's rule).
// A spec change is not Ready on the previous revision's replica: every check about pods looks at the newest
// ReplicaSet's pods only.
import type { V1Deployment, V1Pod, V1PodTemplateSpec, V1ReplicaSet } from '@kubernetes/client-node';
import { canonicalJson } from '../builders/index.js';
import { timeOf } from './time.js';

export const POD_TEMPLATE_HASH = 'pod-template-hash';

/** What one look at a model's engine sees. */
export interface EngineSnapshot {
  deployment?: V1Deployment;
  /** The ReplicaSet whose template is the Deployment's current one; undefined until the controller created it. */
  newest?: V1ReplicaSet;
  /** Every engine pod of the model, any revision, terminating ones included. */
  pods: V1Pod[];
  /** Pods of the newest ReplicaSet that are not terminating. */
  currentPods: V1Pod[];
}

/**
 * The ReplicaSet the Deployment controller considers new: owned by the Deployment, with the Deployment's template
 * (ignoring the pod-template-hash label it adds); the oldest one if several match, as the controller picks.
 */
export function newestReplicaSet(deployment: V1Deployment, replicaSets: V1ReplicaSet[]): V1ReplicaSet | undefined {
  const uid = deployment.metadata?.uid;
  const wanted = canonicalJson(templateWithoutHash(deployment.spec?.template));
  return replicaSets
    .filter((rs) => rs.metadata?.ownerReferences?.some((o) => o.uid === uid))
    .filter((rs) => canonicalJson(templateWithoutHash(rs.spec?.template)) === wanted)
    .sort((a, b) => timeOf(a.metadata?.creationTimestamp) - timeOf(b.metadata?.creationTimestamp))[0];
}

function templateWithoutHash(template: V1PodTemplateSpec | undefined): unknown {
  if (!template) return undefined;
  const copy = JSON.parse(JSON.stringify(template)) as V1PodTemplateSpec;
  if (copy.metadata?.labels) delete copy.metadata.labels[POD_TEMPLATE_HASH];
  // The API server drops an empty label map; compare "no labels" and "{}" alike.
  if (copy.metadata?.labels && Object.keys(copy.metadata.labels).length === 0) delete copy.metadata.labels;
  if (copy.metadata && 'creationTimestamp' in copy.metadata) delete copy.metadata.creationTimestamp;
  return copy;
}

export const isPodReady = (pod: V1Pod): boolean =>
  !pod.metadata?.deletionTimestamp &&
  pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Where a rollout stands, by kubectl's `rollout status` rule for the given generation. */
export type RolloutState =
  | { done: true; replicas: number; readyReplicas: number; updatedReplicas: number }
  | { done: false; reason: string; message: string; deadlineExceeded?: boolean };

/**
 * kubectl's rule: the controller has observed `generation` (and the Deployment's own, newer, generation), the
 * Progressing condition has not timed out, all wanted replicas are updated, no old replica is left, and every updated
 * replica is available (`enough` of them, when given: a model that scales). Pure.
 */
export function rolloutState(deployment: V1Deployment, generation: number, enough?: number): RolloutState {
  const name = deployment.metadata?.name ?? '?';
  const current = deployment.metadata?.generation ?? 0;
  const observed = deployment.status?.observedGeneration ?? 0;
  if (current < generation) {
    return {
      done: false,
      reason: 'DeploymentReplaced',
      message: `Deployment ${name} is at generation ${current}, older than the awaited ${generation}: it was deleted and created again`,
    };
  }
  if (observed < Math.max(current, generation)) {
    return {
      done: false,
      reason: 'WaitingForController',
      message: `waiting for the Deployment controller to observe generation ${Math.max(current, generation)} of ${name} (observed ${observed})`,
    };
  }
  const progressing = deployment.status?.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded') {
    return {
      done: false,
      reason: 'ProgressDeadlineExceeded',
      message:
        `the rollout of ${name} made no progress within progressDeadlineSeconds (${deployment.spec?.progressDeadlineSeconds ?? 600} s): ${progressing.message ?? ''}`.trim(),
      deadlineExceeded: true,
    };
  }
  const wanted = deployment.spec?.replicas ?? 1;
  const status = deployment.status ?? {};
  const updated = status.updatedReplicas ?? 0;
  const replicas = status.replicas ?? 0;
  const available = status.availableReplicas ?? 0;
  if (updated < wanted) {
    return { done: false, reason: 'UpdatingReplicas', message: `${updated} of ${wanted} new replicas updated` };
  }
  if (replicas > updated) {
    return {
      done: false,
      reason: 'TerminatingOldReplicas',
      message: `${replicas - updated} old replicas are pending termination`,
    };
  }
  // A model that scales has rolled out once its fewest replicas are available: the others may wait for a GPU.
  if (available < Math.min(updated, enough ?? updated)) {
    return {
      done: false,
      reason: 'WaitingForAvailable',
      message: `${available} of ${updated} updated replicas available`,
    };
  }
  return { done: true, replicas: wanted, readyReplicas: status.readyReplicas ?? 0, updatedReplicas: updated };
}

/** A short summary of where the current revision's pods are: Pending, ContainerCreating, Starting, Running. */
export function podsState(snapshot: EngineSnapshot): string {
  const pods = snapshot.currentPods;
  if (pods.length === 0) return snapshot.newest ? 'Pending' : 'WaitingForReplicaSet';
  if (pods.every(isPodReady)) return 'Running';
  const waiting = pods
    .flatMap((p) => p.status?.containerStatuses ?? [])
    .map((s) => s.state?.waiting?.reason)
    .find((r) => r);
  if (waiting) return waiting;
  if (pods.some((p) => p.status?.phase === 'Running')) return 'Starting';
  return pods[0]?.status?.phase ?? 'Pending';
}
