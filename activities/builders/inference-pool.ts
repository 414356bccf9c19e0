import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { admissionPort, hasSidecar } from './admission.js';
import { selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { deploymentName } from './names.js';

// The model as a Gateway API Inference Extension pool (docs/design/baseline.md, section 6): an InferencePool whose
// endpoints are the engine pods, so a cluster's inference gateway routes to them through its endpoint picker (the
// user's EPP; Ferry does not run one). With admission the endpoints are each pod's nginx port: the picker spreads the
// load across replicas by queue and KV cache, and each replica still turns away what is above its measured
// concurrency with 429, which the gateway passes on. The picker scrapes /metrics on that port, which admission never
// limits.

export const INFERENCE_POOL_API_VERSION = 'inference.networking.k8s.io/v1';
export const INFERENCE_POOL_KIND = 'InferencePool';

export interface InferencePool extends KubernetesObject {
  metadata: V1ObjectMeta;
  spec: {
    selector: { matchLabels: Record<string, string> };
    targetPorts: { number: number }[];
    appProtocol: 'http';
    endpointPickerRef: {
      group: '';
      kind: 'Service';
      name: string;
      port: { number: number };
      failureMode: 'FailClose' | 'FailOpen';
    };
  };
}

/** The pool's name: the model's, like its Deployment and Service. */
export function inferencePoolName(model: string): string {
  return deploymentName(model);
}

/** The port the pool's endpoints take traffic on: the sidecar's when the replicas have it, else the engine's. */
function inferencePoolPort(model: ServedModel, options: ChildOptions): number {
  return hasSidecar(model, options) ? admissionPort(model) : model.spec.engine.port;
}

/** The InferencePool of `spec.inferencePool`; undefined when the spec asks for none. */
export function buildInferencePool(model: ServedModel, options: ChildOptions): InferencePool | undefined {
  const pool = model.spec.inferencePool;
  if (!pool) return undefined;
  const picker = pool.endpointPicker;
  return {
    apiVersion: INFERENCE_POOL_API_VERSION,
    kind: INFERENCE_POOL_KIND,
    metadata: objectMeta(model, 'pool', inferencePoolName(model.metadata.name), { rootUid: options.rootUid }),
    spec: {
      selector: { matchLabels: selectorLabels(model.metadata.name) },
      targetPorts: [{ number: inferencePoolPort(model, options) }],
      appProtocol: 'http',
      endpointPickerRef: {
        group: '',
        kind: 'Service',
        name: picker.name,
        port: { number: picker.port },
        failureMode: picker.failureMode,
      },
    },
  };
}
