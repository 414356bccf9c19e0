// What names a served model in Temporal: its workflow ID, its cluster's task queue, its search attributes. Pure.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { ServedModel } from './spec/index.js';
import type { Phase } from './status.js';

/** The cluster a model is served by when its spec names none. */
export const DEFAULT_CLUSTER = 'default';

/** What names one served model: the parts of its workflow ID. */
export interface ModelRef {
  cluster: string;
  namespace: string;
  name: string;
}

/** `servedmodel/<cluster>/<namespace>/<name>`: one workflow per model, so Temporal keeps the name unique. */
export function workflowIdFor({ cluster, namespace, name }: ModelRef): string {
  return `servedmodel/${cluster}/${namespace}/${name}`;
}

/** A workflow's page in the Temporal Web UI whose base URL is `webUiUrl`. */
export function webUiLinkFor(webUiUrl: string, temporalNamespace: string, workflowId: string): string {
  const base = webUiUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(temporalNamespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/** The task queue of the worker that serves `cluster`. */
export function taskQueueFor(cluster: string): string {
  return `ferry-${cluster}`;
}

/** The identity of a parsed spec. */
export function modelRefOf(spec: ServedModel): ModelRef {
  return { cluster: spec.spec.cluster, namespace: spec.metadata.namespace, name: spec.metadata.name };
}

// Search attributes (Keyword, registered on the namespace by deploy/local/up.sh)

export const ferryPhaseKey = defineSearchAttributeKey('FerryPhase', SearchAttributeType.KEYWORD);
export const ferryModelKey = defineSearchAttributeKey('FerryModel', SearchAttributeType.KEYWORD);
export const ferryNamespaceKey = defineSearchAttributeKey('FerryNamespace', SearchAttributeType.KEYWORD);
export const ferryClusterKey = defineSearchAttributeKey('FerryCluster', SearchAttributeType.KEYWORD);

/** The search attributes of a model in `phase`; the client may pass them at start, the workflow upserts them. */
export function searchAttributesFor(ref: ModelRef, phase: Phase): SearchAttributePair[] {
  return [
    { key: ferryPhaseKey, value: phase },
    { key: ferryModelKey, value: ref.name },
    { key: ferryNamespaceKey, value: ref.namespace },
    { key: ferryClusterKey, value: ref.cluster },
  ];
}
