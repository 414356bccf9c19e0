// Claiming a model's name in the cluster: look at every object the model would own before writing anything, because
// the forced server-side apply that follows takes fields from anyone.
import type { KubernetesObject, V1ConfigMap } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import {
  type ClaimResult,
  FAILURE,
  failure,
  type ModelInput,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { describeRef, refOf, type ObjectRef } from '../cluster/api.js';
import { childOptions, timingOf, webUiLinkOf, type ActivityDeps } from '../deps.js';
import {
  buildAll,
  buildRoot,
  FIELD_MANAGER,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  objectList,
  sourceHash,
} from '../builders/index.js';
import { isOurs, isTerminating, kindName, nameConflict } from '../readers/ownership.js';
import { ProgressReporter } from '../cluster/progress.js';
import { inferenceExtensionMissing } from './engine.js';
import { releaseTerminatingPvc } from './terminating-pvc.js';
import { waitFor } from '../cluster/wait.js';

/**
 * Every object the model would own now: root, PVC, the current source's puller Job, NetworkPolicy (with the worker's
 * setting on), admission ConfigMap, Deployment, Service, pool.
 */
function ownedRefs(deps: ActivityDeps, model: ServedModel): ObjectRef[] {
  return objectList(buildAll(model, childOptions(deps, ''))).map(refOf);
}

interface Look {
  found: KubernetesObject[];
  terminating: KubernetesObject[];
}

/**
 * Resumes the model's own objects, refuses anyone else's (`NameConflict`, the object untouched), waits for objects
 * being deleted to be gone (a retryable failure after `terminatingPvcWaitMs`), handles our PVC stuck terminating
 * (see terminating-pvc.ts), and only then force-applies the root ConfigMap.
 */
export async function claimName(deps: ActivityDeps, { model }: ModelInput): Promise<ClaimResult> {
  const { cluster } = deps;
  const timing = timingOf(deps);
  const ctx = Context.current();
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const refs = ownedRefs(deps, model);
  // A pool the cluster cannot hold: refused before the name is claimed, so nothing of the model is created.
  if (model.spec.inferencePool && !(await cluster.serves(INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND))) {
    throw inferenceExtensionMissing(model);
  }

  const look = async (): Promise<Look> => {
    const objects = await Promise.all(refs.map((ref) => cluster.get(ref)));
    const found = objects.filter((o): o is KubernetesObject => o !== undefined);
    // An object someone else is deleting frees its name soon: wait for it rather than refuse.
    const foreign = found.filter((o) => !isOurs(o, model) && !isTerminating(o));
    if (foreign.length > 0) throw nameConflict(model, foreign);
    return { found, terminating: found.filter(isTerminating) };
  };

  const waited = await waitFor(cluster, {
    signal: ctx.cancellationSignal,
    pollMs: timing.pollMs,
    deadline: Date.now() + timing.terminatingPvcWaitMs,
    check: async () => {
      const now = await look();
      if (now.terminating.length === 0) return now;
      const released: string[] = [];
      for (const obj of now.terminating) {
        if (obj.kind === 'PersistentVolumeClaim' && isOurs(obj, model)) {
          released.push(...(await releaseTerminatingPvc(cluster, model, obj)));
        }
      }
      await reporter.report({
        step: 'claim',
        state: 'WaitingForDeletion',
        message:
          `waiting for ${now.terminating.map((o) => describeRef(refOf(o))).join(', ')} to finish deleting` +
          (released.length > 0 ? `; asked Ferry's pods ${released.join(', ')} to release the volume` : ''),
      });
      return undefined;
    },
  });
  const settled = waited ?? (await look());
  if (settled.terminating.length > 0) {
    throw failure(
      FAILURE.ObjectsTerminating,
      `cannot serve model ${model.metadata.namespace}/${model.metadata.name} yet: ` +
        settled.terminating.map((o) => `${describeRef(refOf(o))} is still being deleted${finalizers(o)}`).join('; '),
    );
  }

  const root = await cluster.apply<V1ConfigMap>(buildRoot(model, webUiLinkOf(deps, model)), FIELD_MANAGER);
  return {
    rootUid: root.metadata!.uid!,
    sourceHash: sourceHash(model.spec.source),
    resumed: settled.found.filter((o) => isOurs(o, model)).map(kindName),
  };
}

function finalizers(obj: KubernetesObject): string {
  const list = obj.metadata?.finalizers ?? [];
  return list.length > 0 ? ` (finalizers: ${list.join(', ')})` : '';
}
