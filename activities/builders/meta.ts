import type { V1ObjectMeta, V1OwnerReference } from '@kubernetes/client-node';
import {
  modelRefOf,
  workflowIdFor,
  type RevisionShare,
  type ServedModel,
  type Slot,
} from '../../workflows/contract/index.js';
import { ANNOTATION_WORKFLOW_ID, labelsFor, type Component } from './labels.js';
import { rootName } from './names.js';
import type { NetworkPolicyPeer } from './network-policy.js';

/** What every child builder needs besides the spec: the uid of the model's root ConfigMap, once it exists. */
export interface ChildOptions {
  rootUid: string;
  /**
   * Set when the worker runs with FERRY_NETWORK_POLICY=on: every engine pod gets the gate sidecar and the model a
   * NetworkPolicy that admits only these pods (the worker's) to vLLM's own port (network-policy.ts).
   */
  networkPolicy?: NetworkPolicyPeer;
  /** The slot of the revision whose engine objects are built (unset: `a`; docs/design/rollout.md, section 2). */
  slot?: Slot;
  /** With `spec.front`: the revisions it sends requests to (unset: `r1` alone, in slot `a`). */
  shares?: readonly RevisionShare[];
}

/**
 * Points at the root ConfigMap so deleting it garbage-collects the child. Neither `controller` nor
 * `blockOwnerDeletion`: the root is a backstop, not a controller, and blocking would need delete rights on it.
 */
function rootOwnerReference(model: ServedModel, rootUid: string): V1OwnerReference {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: rootName(model.metadata.name),
    uid: rootUid,
    controller: false,
    blockOwnerDeletion: false,
  };
}

export function objectMeta(
  model: ServedModel,
  component: Component,
  name: string,
  extra: { rootUid?: string; annotations?: Record<string, string> } = {},
): V1ObjectMeta {
  return {
    name,
    namespace: model.metadata.namespace,
    labels: labelsFor(model, component),
    annotations: { ...extra.annotations, [ANNOTATION_WORKFLOW_ID]: workflowIdFor(modelRefOf(model)) },
    ...(extra.rootUid !== undefined ? { ownerReferences: [rootOwnerReference(model, extra.rootUid)] } : {}),
  };
}
