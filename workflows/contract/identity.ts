// What names a served model in Temporal: its workflow ID, its cluster's task queue, the names of its updates. Pure,
// and free of the Temporal SDK: the CLI's first request (client/early-update.ts) is built from it before the SDK loads.
import type { ServedModel } from './spec/index.js';

/** The cluster a model is served by when its spec names none. */
export const DEFAULT_CLUSTER = 'default';

/** What names one served model: the parts of its workflow ID. */
export interface ModelRef {
  cluster: string;
  namespace: string;
  name: string;
}

/** A model as messages name it to people: `qwen (namespace models, cluster default)`. */
export function describeRef(ref: ModelRef): string {
  return `${ref.name} (namespace ${ref.namespace}, cluster ${ref.cluster})`;
}

/** The memo key of a model's workflow that names its owning tenant (docs/security.md); absent on an admin's model. */
export const TENANT_MEMO = 'ferry.tenant';

/** The memo key that holds the claim a model's workflow was started with (`applyModel`'s `claim`), when it has one. */
export const CLAIM_MEMO = 'ferry.claim';

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

/**
 * The names of the workflow's updates (`messages.ts` defines them with their types): what a request names when it is
 * built without the SDK.
 */
export const UPDATE_NAMES = { update: 'update', delete: 'delete' } as const;
