import type { V1ConfigMap } from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { ANNOTATION_WEB_UI } from './labels.js';
import { objectMeta } from './meta.js';
import { rootName } from './names.js';
import { sourceAnnotations } from './source.js';

/**
 * The model's root object, `<name>-ferry`: every other object names it as owner, so deleting it lets the garbage
 * collector remove them even if the workflow never runs its teardown. It has no owner itself.
 * With `webUiLink` (the worker knows the Web UI's URL) it names the model's workflow page too.
 */
export function buildRoot(model: ServedModel, webUiLink?: string): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: objectMeta(model, 'root', rootName(model.metadata.name), {
      annotations: {
        ...sourceAnnotations(model.spec.source),
        ...(webUiLink ? { [ANNOTATION_WEB_UI]: webUiLink } : {}),
      },
    }),
    data: { cluster: model.spec.cluster, servedModelName: model.spec.engine.servedModelName },
  };
}
