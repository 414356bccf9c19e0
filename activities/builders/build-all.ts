import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1Job,
  V1NetworkPolicy,
  V1PersistentVolumeClaim,
  V1Service,
} from '@kubernetes/client-node';
import { scalingPolicy, startingReplicas, type ServedModel } from '../../workflows/contract/index.js';
import { admissionConfigMap, hasSidecar } from './admission.js';
import { buildDeployment } from './deployment.js';
import { buildFront, frontedService } from './front-objects.js';
import { buildInferencePool, type InferencePool } from './inference-pool.js';
import type { ChildOptions } from './meta.js';
import { buildNetworkPolicy } from './network-policy.js';
import { buildCachePullerJob, buildCachePvc, onSharedCache } from './cache.js';
import { buildPullerJob } from './puller-job.js';
import { buildPvc } from './pvc.js';
import { buildRoot } from './root.js';
import { buildService } from './service.js';

/** Every object a model owns, as built from its spec. */
export interface ModelObjects {
  root: V1ConfigMap;
  pvc: V1PersistentVolumeClaim;
  pullerJob: V1Job;
  deployment: V1Deployment;
  service: V1Service;
  /** With `spec.slo.admission` or the gate: the sidecar's configuration (here without a limit; the workflow sets it). */
  admission?: V1ConfigMap;
  /** With a worker that runs with FERRY_NETWORK_POLICY=on: who may reach the engine's own port. */
  networkPolicy?: V1NetworkPolicy;
  /** With `spec.inferencePool`: the engine pods as a Gateway API Inference Extension pool. */
  inferencePool?: InferencePool;
  /** With `spec.front` (`service` then selects the front's pods): the engine's own Service, which the front uses; */
  engineService?: V1Service;
  /** the front's configuration; */
  frontConfig?: V1ConfigMap;
  /** and its HAProxy. */
  frontDeployment?: V1Deployment;
}

/** A model with spec.scaling starts at its starting count, with the policy when the spec gives the target. */
function firstScale(model: ServedModel): { replicas?: number; scaling?: ReturnType<typeof scalingPolicy> } {
  const { scaling, replicas } = model.spec;
  if (!scaling) return {};
  const policy = scalingPolicy(scaling);
  return { replicas: startingReplicas(replicas, scaling), ...(policy ? { scaling: policy } : {}) };
}

export function buildAll(model: ServedModel, options: ChildOptions): ModelObjects {
  return {
    root: buildRoot(model),
    // On a shared cache, the cache's: the claim checks their names, a dry run shows them.
    pvc: onSharedCache(model) ? buildCachePvc(model, model.metadata.name) : buildPvc(model, options),
    pullerJob: onSharedCache(model) ? buildCachePullerJob(model, options.rootUid) : buildPullerJob(model, options),
    deployment: buildDeployment(model, { ...options, ...firstScale(model) }),
    service: model.spec.front ? frontedService(model, options) : buildService(model, options),
    ...buildFront(model, options),
    ...(hasSidecar(model, options) ? { admission: admissionConfigMap(model, undefined, options) } : {}),
    ...(options.networkPolicy ? { networkPolicy: buildNetworkPolicy(model, options) } : {}),
    ...(model.spec.inferencePool ? { inferencePool: buildInferencePool(model, options) } : {}),
  };
}

/**
 * The objects in the order the lifecycle creates them: root, volume, puller, network policy, admission, engine, front
 * (the engine's own Service, the configuration, HAProxy), the model's Service, pool.
 */
export function objectList(objects: ModelObjects): KubernetesObject[] {
  const { root, pvc, pullerJob, networkPolicy, admission, deployment, service, inferencePool } = objects;
  const { engineService, frontConfig, frontDeployment } = objects;
  return [
    root,
    pvc,
    pullerJob,
    ...(networkPolicy ? [networkPolicy] : []),
    ...(admission ? [admission] : []),
    deployment,
    ...(engineService ? [engineService] : []),
    ...(frontConfig ? [frontConfig] : []),
    ...(frontDeployment ? [frontDeployment] : []),
    service,
    ...(inferencePool ? [inferencePool] : []),
  ];
}
