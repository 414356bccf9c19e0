import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1Job,
  V1PersistentVolumeClaim,
  V1Service,
} from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { admissionConfigMap, hasAdmission } from './admission.js';
import { buildDeployment } from './deployment.js';
import { buildInferencePool, type InferencePool } from './inference-pool.js';
import type { ChildOptions } from './meta.js';
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
  /** With `spec.slo.admission`: the sidecar's configuration (here without a limit; the workflow sets it). */
  admission?: V1ConfigMap;
  /** With `spec.inferencePool`: the engine pods as a Gateway API Inference Extension pool. */
  inferencePool?: InferencePool;
}

export function buildAll(model: ServedModel, options: ChildOptions): ModelObjects {
  return {
    root: buildRoot(model),
    pvc: buildPvc(model, options),
    pullerJob: buildPullerJob(model, options),
    deployment: buildDeployment(model, options),
    service: buildService(model, options),
    ...(hasAdmission(model) ? { admission: admissionConfigMap(model, undefined, options) } : {}),
    ...(model.spec.inferencePool ? { inferencePool: buildInferencePool(model, options) } : {}),
  };
}

/** The objects in the order the lifecycle creates them: root, volume, puller, admission, service, engine, pool. */
export function objectList(objects: ModelObjects): KubernetesObject[] {
  const { root, pvc, pullerJob, admission, deployment, service, inferencePool } = objects;
  return [
    root,
    pvc,
    pullerJob,
    ...(admission ? [admission] : []),
    deployment,
    service,
    ...(inferencePool ? [inferencePool] : []),
  ];
}
