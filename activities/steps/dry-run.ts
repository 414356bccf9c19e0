// dryRunModel: `ferry serve|update|apply --dry-run=server`, on the worker of the model's cluster. The document is
// parsed by this worker's rules, the objects are built with its own settings (the NetworkPolicy, the Web UI link), the
// checks the claim makes before it writes anything are made, and the API server validates each object by a server-side
// dry-run apply under Ferry's field manager: schema, defaulting, admission, quotas. Nothing is created. The result
// goes into the workflow's history: it holds the objects as built (Secrets named, never read) and the API server's
// answers to them, nothing else.
import type { KubernetesObject, V1ConfigMap } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import {
  type DryRunInput,
  type DryRunObject,
  type DryRunResult,
  safeParseServedModel,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { refOf } from '../cluster/api.js';
import { childOptions, webUiLinkOf, type ActivityDeps } from '../deps.js';
import {
  buildAll,
  buildRoot,
  FIELD_MANAGER,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  objectList,
} from '../builders/index.js';
import { isOurs, isTerminating, nameConflict } from '../readers/ownership.js';
import { inferenceExtensionMissing } from './engine.js';

/** The children's owner reference while the root does not exist: its uid is the API server's to give at creation. */
const ROOT_UID_PLACEHOLDER = 'root-configmap-uid-given-at-creation';

export async function dryRunModel(deps: ActivityDeps, { document }: DryRunInput): Promise<DryRunResult> {
  const parsed = safeParseServedModel(document);
  if (!parsed.ok) return { issues: parsed.issues, objects: [] };
  const model = parsed.model;
  const root = buildRoot(model, webUiLinkOf(deps, model));
  const objects = objectList({ ...buildAll(model, childOptions(deps, await rootUidOf(deps, model, root))), root });
  // A pool the cluster cannot hold is refused as the claim refuses it, before any apply would fail on discovery.
  const poolServed =
    !model.spec.inferencePool || (await deps.cluster.serves(INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND));
  const results: DryRunObject[] = [];
  // One at a time, in the lifecycle's order: a handful of requests, and the answers in the order they are printed.
  for (const obj of objects) {
    results.push(
      obj.kind === INFERENCE_POOL_KIND && !poolServed
        ? { ...idOf(obj), refusal: inferenceExtensionMissing(model).message }
        : await dryRunObject(deps, model, obj),
    );
  }
  return { issues: [], objects: results };
}

/**
 * The existing root's uid when the model's root is ours (an update's dry run), else the placeholder. A refused read
 * (no access to the namespace) leaves the placeholder: the root's own dry run reports the refusal.
 */
async function rootUidOf(deps: ActivityDeps, model: ServedModel, root: V1ConfigMap): Promise<string> {
  const existing = await deps.cluster.get<V1ConfigMap>(refOf(root)).catch((err: unknown) => {
    if (isRefusal(err)) return undefined;
    throw err;
  });
  return existing && isOurs(existing, model) && existing.metadata?.uid ? existing.metadata.uid : ROOT_UID_PLACEHOLDER;
}

/**
 * One object: refused when someone else's object holds its name (the claim's `NameConflict`), else the API server's
 * dry-run answer or its refusal. A failure a retry may fix (the API server unreachable) is thrown: the activity is
 * retried, and a dry run reports only answers.
 */
async function dryRunObject(deps: ActivityDeps, model: ServedModel, obj: KubernetesObject): Promise<DryRunObject> {
  const { cluster } = deps;
  try {
    const existing = await cluster.get(refOf(obj));
    if (existing && !isOurs(existing, model) && !isTerminating(existing)) {
      return { ...idOf(obj), refusal: nameConflict(model, [existing]).message };
    }
    const answer = await cluster.apply(obj, FIELD_MANAGER, { dryRun: true });
    return { ...idOf(obj), object: withoutManagedFields(answer) };
  } catch (err) {
    if (isRefusal(err)) return { ...idOf(obj), refusal: err.message };
    throw err;
  }
}

/** An answer no retry changes (a rejection, a denial), as the failure catalogue says. */
const isRefusal = (err: unknown): err is ApplicationFailure =>
  err instanceof ApplicationFailure && err.nonRetryable === true;

const idOf = (obj: KubernetesObject): { kind: string; name: string } => ({
  kind: obj.kind!,
  name: obj.metadata!.name!,
});

/** The answer as `kubectl apply --dry-run=server -o yaml` shows it: without the field managers' bookkeeping. */
function withoutManagedFields(obj: KubernetesObject): Record<string, unknown> {
  const { managedFields: _, ...metadata } = obj.metadata ?? {};
  return { ...obj, metadata };
}
