// Joining and leaving a cache of weights (docs/design/cache.md, section 3): the models that use a cache are recorded
// on its volume, each change written on the resourceVersion read, so that two models joining or leaving at once are
// both counted (the second gets 409 and reads again), and the last to leave deletes the volume only if no model has
// joined since it read.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE, failure, type ServedModel } from '../../workflows/contract/index.js';
import {
  ANNOTATION_CACHE_USERS,
  buildCachePvc,
  cacheClaimName,
  cacheJobName,
  cacheKey,
  cacheUsers,
  isCacheObject,
  usersAnnotation,
} from '../builders/index.js';
import { nameConflict } from '../readers/ownership.js';
import { refOf, type Cluster, type ObjectRef } from './api.js';

/** Reads and writes of one join or leave before it gives the activity's retry the rest. */
const TRIES = 8;

/** A write to read again for: the volume changed (409), or went (404) since it was read. */
const isStale = (err: unknown): boolean => {
  if (!(err instanceof ApplicationFailure)) return false;
  const status = (err.details?.[0] as { status?: number | null } | undefined)?.status;
  return err.type === 'KubernetesHttp409' || status === 404;
};

export const cacheClaimRef = (model: ServedModel): ObjectRef => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  name: cacheClaimName(cacheKey(model.spec.source)),
  namespace: model.metadata.namespace,
});

/** Reads the cache's volume; `NameConflict` when a PVC of that name is not that cache's. */
async function readCache(cluster: Cluster, model: ServedModel, ref: ObjectRef) {
  const pvc = await cluster.get<V1PersistentVolumeClaim>(ref);
  if (pvc && !isCacheObject(pvc.metadata?.labels, cacheKey(model.spec.source))) throw nameConflict(model, [pvc]);
  return pvc;
}

const usersPatch = (pvc: V1PersistentVolumeClaim, users: string[]) => ({
  metadata: {
    resourceVersion: pvc.metadata?.resourceVersion,
    annotations: { [ANNOTATION_CACHE_USERS]: usersAnnotation(users) },
  },
});

const contended = (ref: ObjectRef) =>
  failure(
    'KubernetesHttp409',
    `PersistentVolumeClaim ${ref.namespace}/${ref.name} changed on each of ${TRIES} tries to record its users`,
  );

/**
 * Records `user` (a model's name, or `<name>/b` for a rollout's candidate) on its source's cache, creating the volume
 * when there is none; returns the volume. Idempotent. A volume being deleted (the last user has just left) fails with
 * the retryable `VolumeBeingDeleted`: it is created again once it is gone.
 */
export async function joinCache(cluster: Cluster, model: ServedModel, user: string): Promise<V1PersistentVolumeClaim> {
  const desired = buildCachePvc(model, user);
  const ref = refOf(desired);
  for (let i = 0; i < TRIES; i++) {
    const pvc = await readCache(cluster, model, ref);
    try {
      if (!pvc) return await cluster.create(desired);
      if (pvc.metadata?.deletionTimestamp) {
        throw failure(
          FAILURE.VolumeBeingDeleted,
          `cache volume ${ref.namespace}/${ref.name} is being deleted; it is created again once it is gone`,
        );
      }
      const users = cacheUsers(pvc);
      if (users.includes(user)) return pvc;
      return await cluster.mergePatch<V1PersistentVolumeClaim>(ref, usersPatch(pvc, [...users, user]));
    } catch (err) {
      if (!isStale(err)) throw err;
    }
  }
  throw contended(ref);
}

async function deleteCacheJob(cluster: Cluster, model: ServedModel): Promise<void> {
  const ref = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    name: cacheJobName(cacheKey(model.spec.source)),
    namespace: model.metadata.namespace,
  };
  const job = await cluster.get(ref);
  if (job && isCacheObject(job.metadata?.labels, cacheKey(model.spec.source)) && !job.metadata?.deletionTimestamp) {
    await cluster.delete(ref, 'Background', { uid: job.metadata?.uid });
  }
}

/** What leaving did: still used by others, deleted as the last user, kept as the last (retained), or nothing there. */
export type CacheLeft = 'left' | 'deleted' | 'retained' | 'absent';

/**
 * Removes `user` from its source's cache. The last user out deletes the volume (its puller Job goes with it, as the
 * volume owns it) unless `retain`: then the volume and its weights stay, with no user, for the next model of that
 * source. The delete is conditional on the resourceVersion read, so a model that joined meanwhile keeps it.
 */
export async function leaveCache(
  cluster: Cluster,
  model: ServedModel,
  user: string,
  retain: boolean,
): Promise<CacheLeft> {
  const ref = cacheClaimRef(model);
  for (let i = 0; i < TRIES; i++) {
    const pvc = await readCache(cluster, model, ref);
    if (!pvc) return 'absent';
    const users = cacheUsers(pvc);
    const rest = users.filter((u) => u !== user);
    try {
      if (rest.length > 0) {
        if (rest.length !== users.length) await cluster.mergePatch(ref, usersPatch(pvc, rest));
        return 'left';
      }
      if (retain) {
        if (users.length > 0) await cluster.mergePatch(ref, usersPatch(pvc, []));
        return 'retained';
      }
      if (!pvc.metadata?.deletionTimestamp) {
        // Its Job first: a pod of it, running or finished, keeps the volume (kubernetes.io/pvc-protection), and the
        // Job, which the volume owns, would only go once the volume has.
        await deleteCacheJob(cluster, model);
        await cluster.delete(ref, 'Background', {
          uid: pvc.metadata?.uid,
          resourceVersion: pvc.metadata?.resourceVersion,
        });
      }
      return 'deleted';
    } catch (err) {
      if (!isStale(err)) throw err;
    }
  }
  throw contended(ref);
}
