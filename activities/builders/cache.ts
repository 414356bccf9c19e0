// One copy of the weights per source (`spec.storage.cache: shared`, docs/design/cache.md): the cache's key, its volume
// and puller Job, who uses it, and the affinity that keeps every pod on a ReadWriteOnce cache's node. Pure builders;
// activities/cluster/cache.ts joins and leaves a cache on the cluster.
import type { V1Affinity, V1Job, V1PersistentVolumeClaim, V1PodAffinityTerm } from '@kubernetes/client-node';
import {
  sourceIdentity,
  sourceSecret,
  type ServedModel,
  type Slot,
  type SourceSpec,
} from '../../workflows/contract/index.js';
import { canonicalJson, sha256Hex } from './hash.js';
import {
  LABEL_COMPONENT,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  LABEL_MODEL,
  MANAGED_BY,
  type Component,
} from './labels.js';
import { pvcName, slotBase } from './names.js';
import { buildPullerJob } from './puller-job.js';
import { sourceAnnotations } from './source.js';

/** On a cache's volume, its Job and every pod that mounts it: the cache's key, its first 12 hex digits. */
export const LABEL_CACHE = 'ferry.dev/cache';
/** On a cache's volume: the models that use it, sorted and comma-separated (`<name>` or, for a candidate, `<name>/b`). */
export const ANNOTATION_CACHE_USERS = 'ferry.dev/cache-users';

/**
 * The key of the cache that holds a source's weights: its identity and the name of the Secret that reads it, since a
 * copy must not give a model weights its own Secret could not read. Two models of a namespace share a cache only when
 * both are equal; caches never cross namespaces (a volume belongs to one).
 */
export function cacheKey(source: SourceSpec): string {
  return sha256Hex(canonicalJson({ source: sourceIdentity(source), secret: sourceSecret(source) ?? null })).slice(
    0,
    12,
  );
}

/** The cache's volume: `ferry-cache-<key>`. */
export const cacheClaimName = (key: string): string => `ferry-cache-${key}`;

/** True when the model's weights are in its source's shared cache rather than a volume of its own. */
export const onSharedCache = (model: ServedModel): boolean => model.spec.storage.cache === 'shared';

/** The volume that holds the weights of a model's revision in `slot`: its source's cache, or its own volume. */
export function weightsClaim(model: ServedModel, slot?: Slot): string {
  return onSharedCache(model)
    ? cacheClaimName(cacheKey(model.spec.source))
    : pvcName(slotBase(model.metadata.name, slot));
}

/** The cache's one puller Job: `ferry-cache-<key>-pull`. */
export const cacheJobName = (key: string): string => `${cacheClaimName(key)}-pull`;

/** The labels of a cache's objects: Ferry's, the component and the cache; no model's, since they are no one model's. */
function cacheLabels(key: string, component: Component): Record<string, string> {
  return { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: component, [LABEL_CACHE]: key };
}

/** True when `labels` are those of cache `key`'s objects. */
export const isCacheObject = (labels: Record<string, string> | undefined, key: string): boolean =>
  labels?.[LABEL_MANAGED_BY] === MANAGED_BY && labels?.[LABEL_CACHE] === key;

/** The users recorded on a cache's volume. */
export function cacheUsers(pvc: V1PersistentVolumeClaim | undefined): string[] {
  const value = pvc?.metadata?.annotations?.[ANNOTATION_CACHE_USERS] ?? '';
  return value.split(',').filter((name) => name !== '');
}

/** The annotation's value for `users`: sorted, each once. */
export const usersAnnotation = (users: Iterable<string>): string => [...new Set(users)].sort().join(',');

/**
 * A cache's volume as the first model that needs it creates it: its size, class and access mode, the source it is for
 * and that model as its only user. No owner reference: no model's root owns it, and the last model to leave deletes
 * it (activities/cluster/cache.ts). Created if absent, never applied again.
 */
export function buildCachePvc(model: ServedModel, user: string): V1PersistentVolumeClaim {
  const { storage, source } = model.spec;
  const key = cacheKey(source);
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: cacheClaimName(key),
      namespace: model.metadata.namespace,
      labels: cacheLabels(key, 'storage'),
      annotations: { ...sourceAnnotations(source), [ANNOTATION_CACHE_USERS]: usersAnnotation([user]) },
    },
    spec: {
      accessModes: [storage.accessMode],
      ...(storage.storageClassName !== null ? { storageClassName: storage.storageClassName } : {}),
      resources: { requests: { storage: storage.size } },
    },
  };
}

/**
 * The affinity of a pod that mounts a ReadWriteOnce cache: on the node of the other pods of that cache (the first pod
 * is placed freely: a required term that its own labels match, and no other pod does, is satisfied), beside the
 * model's own affinity. `undefined` when the access mode lets every node mount the volume.
 */
export function cacheAffinity(model: ServedModel, affinity: V1Affinity | undefined): V1Affinity | undefined {
  if (model.spec.storage.accessMode !== 'ReadWriteOnce') return affinity;
  const term: V1PodAffinityTerm = {
    labelSelector: { matchLabels: { [LABEL_CACHE]: cacheKey(model.spec.source) } },
    topologyKey: 'kubernetes.io/hostname',
  };
  const required = affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  return {
    ...affinity,
    podAffinity: { ...affinity?.podAffinity, requiredDuringSchedulingIgnoredDuringExecution: [...required, term] },
  };
}

/**
 * The cache's puller Job: the model's puller (its image, deadline, retries and environment) writing into the cache's
 * volume, named and labelled for the cache, and owned by the volume, so that the garbage collector takes it with the
 * cache. `pvcUid` is the volume's uid.
 */
export function buildCachePullerJob(model: ServedModel, pvcUid: string): V1Job {
  const key = cacheKey(model.spec.source);
  const job = buildPullerJob(model, { rootUid: '' });
  const claim = cacheClaimName(key);
  const template = job.spec!.template;
  // The cache's labels over the creating model's own (which a simulated cluster reads), never its name: the Job is no
  // one model's, and no model's teardown may take it from the others.
  const { [LABEL_MODEL]: _model, [LABEL_INSTANCE]: _instance, ...userLabels } = model.metadata.labels ?? {};
  template.metadata = { ...template.metadata, labels: { ...userLabels, ...cacheLabels(key, 'puller') } };
  template.spec!.volumes = template.spec!.volumes!.map((v) =>
    v.name === 'weights' ? { name: 'weights', persistentVolumeClaim: { claimName: claim } } : v,
  );
  const affinity = cacheAffinity(model, template.spec!.affinity);
  if (affinity) template.spec!.affinity = affinity;
  job.metadata = {
    name: cacheJobName(key),
    namespace: model.metadata.namespace,
    labels: cacheLabels(key, 'puller'),
    annotations: sourceAnnotations(model.spec.source),
    ownerReferences: [{ apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: claim, uid: pvcUid, controller: false }],
  };
  return job;
}
