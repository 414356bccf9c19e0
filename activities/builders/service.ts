import type { V1Service } from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { HTTP_PORT_NAME } from './deployment.js';
import { selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { serviceName, slotBase } from './names.js';

/**
 * The ClusterIP Service in front of the engine: `http://<name>.<namespace>.svc:<port>`; in slot `b`, that revision's
 * engine Service, `<name>-b`, which only the front sends to (docs/design/rollout.md, section 2).
 */
export function buildService(model: ServedModel, options: ChildOptions): V1Service {
  const base = slotBase(model.metadata.name, options.slot);
  return modelService(model, serviceName(base), selectorLabels(base), options);
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
