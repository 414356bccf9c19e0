import type { V1Service } from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { HTTP_PORT_NAME } from './deployment.js';
import { selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { serviceName, slotBase } from './names.js';

/**
 * The ClusterIP Service in front of the engine: `http://<name>.<namespace>.svc:<port>`, selecting the engine pods of
 * the current revision's slot (docs/design/rollout.md, section 2).
 */
export function buildService(model: ServedModel, options: ChildOptions): V1Service {
  const name = model.metadata.name;
  return modelService(model, serviceName(name), selectorLabels(slotBase(name, options.slot)), options);
}

/** A ClusterIP Service `name` on the model's port, to the `http` port of the pods `selector` selects. */
export function modelService(
  model: ServedModel,
  name: string,
  selector: Record<string, string>,
  options: ChildOptions,
): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: objectMeta(model, 'service', name, { rootUid: options.rootUid }),
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [{ name: HTTP_PORT_NAME, port: model.spec.engine.port, targetPort: HTTP_PORT_NAME, protocol: 'TCP' }],
    },
  };
}
