// The front of a model with `spec.front` (activities/builders/front-objects.ts): the engine's own Service, the
// front's configuration and its HAProxy Deployment, applied with the engine and before the model's Service points at
// them; for a model without `spec.front`, any front it had is deleted once the Service points back at the engine.
import type { KubernetesObject, V1Deployment } from '@kubernetes/client-node';
import type { ServedModel, Slot } from '../../workflows/contract/index.js';
import { buildFront, FIELD_MANAGER, frontName, slotEngineServiceName, type ChildOptions } from '../builders/index.js';
import type { ObjectRef } from '../cluster/api.js';
import type { ActivityDeps } from '../deps.js';
import { assertOurs, isOurs } from '../readers/ownership.js';

/**
 * The front's objects, in the order they are applied: the engine's own Service (`slot`'s: docs/design/rollout.md,
 * section 2), the configuration, HAProxy.
 */
export function frontRefs(model: ServedModel, slot?: Slot): [ObjectRef, ObjectRef, ObjectRef] {
  const { namespace, name } = model.metadata;
  return [
    { apiVersion: 'v1', kind: 'Service', name: slotEngineServiceName(name, slot), namespace },
    { apiVersion: 'v1', kind: 'ConfigMap', name: frontName(name), namespace },
    { apiVersion: 'apps/v1', kind: 'Deployment', name: frontName(name), namespace },
  ];
}

/**
 * With `spec.front`: applies its objects (an object of the same name that is not this model's is never taken over).
 * Without: deletes those that are there and this model's.
 */
export async function syncFront(deps: ActivityDeps, model: ServedModel, options: ChildOptions): Promise<void> {
  const refs = frontRefs(model, options.slot);
  const existing = await Promise.all(refs.map((ref) => deps.cluster.get<KubernetesObject>(ref)));
  const front = buildFront(model, options);
  if (front.engineService) {
    for (const obj of existing) assertOurs(model, obj);
    for (const obj of [front.engineService, front.frontConfig, front.frontDeployment]) {
      await deps.cluster.apply(obj, FIELD_MANAGER);
    }
    return;
  }
  // HAProxy first, so that it is not left without its configuration or the Service it sends to.
  for (const index of [2, 1, 0]) {
    const obj = existing[index];
    if (!obj || !isOurs(obj, model)) continue;
    await deps.cluster.delete(refs[index as 0 | 1 | 2], 'Background', { uid: obj.metadata?.uid });
  }
}

/**
 * With `spec.front`: its ready pods (HAProxy answers its ready path), as its Deployment's status counts them; undefined
 * without a front. A model is Ready only once one is: the model's Service selects the front's pods.
 */
export async function frontReadyPods(deps: ActivityDeps, model: ServedModel): Promise<number | undefined> {
  if (!model.spec.front) return undefined;
  const deployment = await deps.cluster.get<V1Deployment>(frontRefs(model)[2]);
  return deployment?.status?.readyReplicas ?? 0;
}
