// The search attributes of a served model (Keyword, registered on the namespace by deploy/local/up.sh): what
// `ferry list` and the Web UI filter on. The client may pass them at start; the workflow upserts them on every phase.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { ModelRef } from './identity.js';
import type { Phase } from './status.js';

export const ferryPhaseKey = defineSearchAttributeKey('FerryPhase', SearchAttributeType.KEYWORD);
export const ferryModelKey = defineSearchAttributeKey('FerryModel', SearchAttributeType.KEYWORD);
export const ferryNamespaceKey = defineSearchAttributeKey('FerryNamespace', SearchAttributeType.KEYWORD);
export const ferryClusterKey = defineSearchAttributeKey('FerryCluster', SearchAttributeType.KEYWORD);

/** The visibility query of the running models (workflows) of `cluster`, as its workers list them. */
export const runningOnCluster = (cluster: string): string =>
  `${ferryClusterKey.name} = '${cluster}' AND ExecutionStatus = 'Running'`;

/** The search attributes of a model in `phase`; the client may pass them at start, the workflow upserts them. */
export function searchAttributesFor(ref: ModelRef, phase: Phase): SearchAttributePair[] {
  return [
    { key: ferryPhaseKey, value: phase },
    { key: ferryModelKey, value: ref.name },
    { key: ferryNamespaceKey, value: ref.namespace },
    { key: ferryClusterKey, value: ref.cluster },
  ];
}
