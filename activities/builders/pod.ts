import type { V1Affinity, V1EnvVar, V1PodSecurityContext, V1PodSpec, V1SecurityContext } from '@kubernetes/client-node';
import type { EnvVar, ServedModel, Slot } from '../../workflows/contract/index.js';
import { selectorLabels } from './labels.js';
import { slotBase } from './names.js';

// The vLLM image's own user: `vllm`, uid 2000, gid 0. An arbitrary uid has no passwd entry and torch crashes at
// start-up (getpwuid); the puller runs as the same user so the engine can read what it wrote.
const ENGINE_UID = 2000;
const ENGINE_GID = 0;

/** Pod security for puller and engine alike: passes Pod Security "restricted". */
export function podSecurityContext(): V1PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: ENGINE_UID,
    runAsGroup: ENGINE_GID,
    // The kubelet makes the fresh volume group-writable for gid 0, so uid 2000 can write the weights.
    fsGroup: ENGINE_GID,
    // Skip the recursive chown of a large volume whose root already has the right group (retained weights).
    fsGroupChangePolicy: 'OnRootMismatch',
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

export function containerSecurityContext(): V1SecurityContext {
  return { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
}

/**
 * The engine's node selector, tolerations and affinity; the puller uses the same, because a zonal volume binds
 * to the zone of its first pod. Empty settings are left out rather than sent empty.
 */
export function podScheduling(model: ServedModel): Pick<V1PodSpec, 'nodeSelector' | 'tolerations' | 'affinity'> {
  const { nodeSelector, tolerations, affinity } = model.spec.scheduling;
  return {
    ...(Object.keys(nodeSelector).length > 0 ? { nodeSelector: { ...nodeSelector } } : {}),
    ...(tolerations.length > 0 ? { tolerations: tolerations.map((t) => ({ ...t })) } : {}),
    ...(affinity ? { affinity: structuredClone(affinity) } : {}),
  };
}

/** A variable of the spec as the container's: its value, or a reference to a Secret's key (the value stays there). */
export function containerEnvVar(variable: EnvVar): V1EnvVar {
  return variable.valueFrom
    ? { name: variable.name, valueFrom: { secretKeyRef: { ...variable.valueFrom.secretKeyRef } } }
    : { name: variable.name, value: variable.value ?? '' };
}

/**
 * The user's affinity, and, with a ReadWriteOnce volume, the node of the engine's pods, which hold the volume: a pod
 * on the same node may mount it too, one on another node waits with Multi-Attach for as long as they run. The first
 * engine pod may go anywhere (a pod that matches its own affinity term and finds no other is schedulable).
 */
export function onTheEnginesNode(model: ServedModel, slot?: Slot): V1Affinity | undefined {
  const { affinity } = podScheduling(model);
  if (model.spec.storage.accessMode !== 'ReadWriteOnce') return affinity;
  const withEngine = {
    labelSelector: { matchLabels: selectorLabels(slotBase(model.metadata.name, slot)) },
    topologyKey: 'kubernetes.io/hostname',
  };
  const required = affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  return {
    ...affinity,
    podAffinity: {
      ...affinity?.podAffinity,
      requiredDuringSchedulingIgnoredDuringExecution: [...required, withEngine],
    },
  };
}
