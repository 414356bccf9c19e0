// Whose an object is: Ferry's for this model (resume it) or someone else's (never adopt, never overwrite).
import type { KubernetesObject } from '@kubernetes/client-node';
import { type ApplicationFailure } from '@temporalio/common';
import { FAILURE, failure, type ServedModel } from '../../workflows/contract/index.js';
import { describeRef, refOf } from '../cluster/api.js';
import {
  cacheKey,
  isCacheObject,
  isOwnedByModel,
  LABEL_MANAGED_BY,
  LABEL_MODEL,
  MANAGED_BY,
  onSharedCache,
} from '../builders/index.js';

/** The model's own object, or one of its shared cache's (docs/design/cache.md): its volume and puller Job. */
export const isOurs = (obj: KubernetesObject, model: ServedModel): boolean =>
  isOwnedByModel(obj.metadata?.labels, model.metadata.name) ||
  (onSharedCache(model) && isCacheObject(obj.metadata?.labels, cacheKey(model.spec.source)));

/** The model's own object, never a cache's that other models share. */
export const isModelsOwn = (obj: KubernetesObject, model: ServedModel): boolean =>
  isOwnedByModel(obj.metadata?.labels, model.metadata.name);

export const isTerminating = (obj: KubernetesObject): boolean => Boolean(obj.metadata?.deletionTimestamp);

/** `Kind/name`, as `ClaimResult.resumed` lists objects. */
export const kindName = (obj: KubernetesObject): string => `${obj.kind}/${obj.metadata?.name}`;

/** Who an object seems to belong to, for a person reading a conflict: its owner, its manager label, or its writers. */
function describeOwner(obj: KubernetesObject): string {
  const meta = obj.metadata ?? {};
  const owner = meta.ownerReferences?.find((r) => r.controller) ?? meta.ownerReferences?.[0];
  if (owner) return `owned by ${owner.kind} ${owner.name}`;
  const managedBy = meta.labels?.[LABEL_MANAGED_BY];
  const model = meta.labels?.[LABEL_MODEL];
  if (managedBy === MANAGED_BY && model) return `Ferry's object for model ${model}`;
  if (managedBy) return `managed by ${managedBy}`;
  const writers = [...new Set((meta.managedFields ?? []).map((f) => f.manager).filter((m): m is string => !!m))];
  if (writers.length > 0) return `written by ${writers.join(', ')}, without Ferry's labels`;
  return "without Ferry's labels";
}

/** The non-retryable `NameConflict` for objects with names the model needs that belong to someone else. */
export function nameConflict(model: ServedModel, foreign: KubernetesObject[]): ApplicationFailure {
  const what = foreign.map((o) => `${describeRef(refOf(o))} already exists (${describeOwner(o)})`).join('; ');
  return failure(
    FAILURE.NameConflict,
    `cannot serve model ${model.metadata.namespace}/${model.metadata.name}: ${what}. Ferry never adopts or ` +
      'overwrites an object it did not create: delete or rename it, or serve the model under another name',
    foreign.map((o) => ({
      kind: o.kind,
      name: o.metadata?.name,
      namespace: o.metadata?.namespace,
      owner: describeOwner(o),
    })),
  );
}

/** Throws `NameConflict` unless `obj` is absent or ours. */
export function assertOurs<T extends KubernetesObject>(model: ServedModel, obj: T | undefined): T | undefined {
  if (obj && !isOurs(obj, model)) throw nameConflict(model, [obj]);
  return obj;
}
