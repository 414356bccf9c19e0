import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1Job,
  V1PersistentVolumeClaim,
  V1Service,
} from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { buildDeployment } from './deployment.js';
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
}

export function buildAll(model: ServedModel, options: ChildOptions): ModelObjects {
  return {
    root: buildRoot(model),
    pvc: buildPvc(model, options),
    pullerJob: buildPullerJob(model, options),
    deployment: buildDeployment(model, options),
    service: buildService(model, options),
  };
}

/** The objects in the order the lifecycle creates them: root, volume, puller, engine, service. */
export function objectList(objects: ModelObjects): KubernetesObject[] {
  return [objects.root, objects.pvc, objects.pullerJob, objects.deployment, objects.service];
}
