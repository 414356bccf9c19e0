import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { describeSource, type ServedModel, type Slot } from '../../workflows/contract/index.js';
import { ANNOTATION_WEIGHTS_SOURCE, ANNOTATION_WEIGHTS_SOURCE_HASH } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { weightsClaim } from './cache.js';
import { pvcName, slotBase } from './names.js';
import { sourceAnnotations, sourceHash } from './source.js';

/**
 * The model's weights volume, labelled from the first apply (a retained volume has no owner and is recognised by
 * its labels). With `retainOnDelete` it has no owner reference, so deleting the root leaves it for the next model
 * of the same name. Its source annotations name the source the spec asks for; which weights it really holds is
 * recorded separately by `buildWeightsRecord`.
 */
export function buildPvc(model: ServedModel, options: ChildOptions): V1PersistentVolumeClaim {
  const { storage, source } = model.spec;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: objectMeta(model, 'storage', pvcName(slotBase(model.metadata.name, options.slot)), {
      ...(storage.retainOnDelete ? {} : { rootUid: options.rootUid }),
      annotations: sourceAnnotations(source),
    }),
    spec: {
      accessModes: [storage.accessMode],
      // Left out when null, so the cluster's default StorageClass applies.
      ...(storage.storageClassName !== null ? { storageClassName: storage.storageClassName } : {}),
      resources: { requests: { storage: storage.size } },
    },
  };
}

/**
 * A partial PVC to apply under WEIGHTS_FIELD_MANAGER once a pull has succeeded: it records which source the volume
 * completely holds, so a later run (a retained volume, a resumed workflow) can skip the download.
 */
export function buildWeightsRecord(model: ServedModel, slot?: Slot): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: weightsClaim(model, slot),
      namespace: model.metadata.namespace,
      annotations: {
        [ANNOTATION_WEIGHTS_SOURCE_HASH]: sourceHash(model.spec.source),
        [ANNOTATION_WEIGHTS_SOURCE]: describeSource(model.spec.source),
      },
    },
  };
}

/** True when a live PVC records that it completely holds the weights of the model's source. */
export function holdsWeightsFor(pvc: V1PersistentVolumeClaim, model: ServedModel): boolean {
  return pvc.metadata?.annotations?.[ANNOTATION_WEIGHTS_SOURCE_HASH] === sourceHash(model.spec.source);
}
