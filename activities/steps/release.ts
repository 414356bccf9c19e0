// Releasing the volume after a download: a ReadWriteOnce volume is attached to one node, so the puller's pod must be
// really gone before the engine's pod (maybe on another node) can mount it, or the engine fails with Multi-Attach.
import type { V1Job, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { FAILURE, failure, type ModelInput, type ServedModel, type Slot } from '../../workflows/contract/index.js';
import type { Cluster } from '../cluster/api.js';
import { timingOf, type ActivityDeps } from '../deps.js';
import {
  buildWeightsRecord,
  modelLabelSelector,
  onSharedCache,
  sourceHash,
  WEIGHTS_FIELD_MANAGER,
  weightsClaim,
} from '../builders/index.js';
import { assertOurs, isTerminating } from '../readers/ownership.js';
import { ProgressReporter } from '../cluster/progress.js';
import { jobPodSelector, jobRef } from './puller.js';
import { jobEnd } from '../readers/puller-status.js';
import { waitFor } from '../cluster/wait.js';

export type ReleaseInput = ModelInput & { jobName: string; sourceHash: string; abandon?: boolean };

/**
 * Deletes the puller Job and its pods, waits until no pod of it exists, and then, unless `abandon`, records on the PVC
 * (under WEIGHTS_FIELD_MANAGER) that the volume holds the source's weights. A Job already gone was released before:
 * nothing to wait for. The weights are recorded only for a Job that completed (or is gone, which the workflow reaches
 * only after awaitPuller returned); never for a Job that is still running or failed.
 */
export async function releaseVolume(deps: ActivityDeps, input: ReleaseInput): Promise<void> {
  const { model, jobName, abandon = false } = input;
  const { cluster } = deps;
  const timing = timingOf(deps);
  const ctx = Context.current();
  if (!abandon && input.sourceHash !== sourceHash(model.spec.source)) {
    throw failure(
      FAILURE.InvalidInput,
      `releaseVolume: the pulled source ${input.sourceHash.slice(0, 8)} is not the model's source ` +
        sourceHash(model.spec.source).slice(0, 8),
    );
  }
  const ref = jobRef(model, jobName);
  const job = assertOurs(model, await cluster.get<V1Job>(ref));
  const completed = !job || jobEnd(job)?.kind === 'complete';
  const cache = onSharedCache(model);
  if (cache) {
    // A cache's pull may be awaited by other models: one abandoned while it runs is left to them (the last model to
    // leave the cache deletes it), one that failed goes (a retry starts a new one), and a complete one is recorded
    // before its Job goes, so that a model that finds the Job gone finds the weights recorded. Its pods are the
    // cache's, not this model's: they carry no model label.
    if (abandon && job && !jobEnd(job)) return;
    if (!abandon && completed) await recordWeights(cluster, model, input.slot);
  }
  if (job && !isTerminating(job)) await cluster.delete(ref, 'Background', { uid: job.metadata?.uid });

  const namespace = model.metadata.namespace;
  const selector = cache
    ? jobPodSelector(jobName)
    : `${jobPodSelector(jobName)},${modelLabelSelector(model.metadata.name)}`;
  const listPods = () => cluster.list<V1Pod>('v1', 'Pod', namespace, { labelSelector: selector });
  // The garbage collector would delete them too, in its own time; the engine is waiting.
  await deletePods(cluster, namespace, await listPods());

  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  let left: V1Pod[] = [];
  const released = await waitFor(cluster, {
    signal: ctx.cancellationSignal,
    pollMs: timing.pollMs,
    deadline: Date.now() + timing.deletionWaitMs,
    watches: [{ path: `/api/v1/namespaces/${namespace}/pods`, query: { labelSelector: selector } }],
    check: async (trigger) => {
      left = await listPods();
      if (left.length === 0) return true;
      if (trigger !== 'change') {
        // Pods created meanwhile by a Job that was not yet deleted get the same treatment.
        await deletePods(cluster, namespace, left);
        await reporter.report({
          step: 'release',
          state: 'WaitingForPods',
          message: `waiting for puller pod ${left.map((p) => p.metadata?.name).join(', ')} to be gone`,
        });
      }
      return undefined;
    },
  });
  if (!released) {
    throw failure(
      FAILURE.VolumeNotReleased,
      `puller pod ${left.map((p) => `${namespace}/${p.metadata?.name}`).join(', ')} still exists ` +
        `${Math.round(timing.deletionWaitMs / 1000)} s after its deletion (is its node unreachable?); ` +
        'the volume may still be attached',
    );
  }

  if (abandon || cache) return;
  if (!completed) {
    ctx.log.warn('puller Job released before it completed; the weights are not recorded', { jobName });
    return;
  }
  await recordWeights(cluster, model, input.slot);
}

async function deletePods(cluster: Cluster, namespace: string, pods: V1Pod[]): Promise<void> {
  for (const pod of pods) {
    if (pod.metadata?.deletionTimestamp) continue;
    await cluster.delete({ apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, namespace }, 'Background', {
      uid: pod.metadata?.uid,
    });
  }
}

/** Records which source the volume completely holds, so a later run (or a retained volume) skips the download. */
async function recordWeights(cluster: Cluster, model: ServedModel, slot: Slot | undefined): Promise<void> {
  const pvc = assertOurs(
    model,
    await cluster.get<V1PersistentVolumeClaim>({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      name: weightsClaim(model, slot),
      namespace: model.metadata.namespace,
    }),
  );
  // No volume (torn down meanwhile) holds nothing to record; an apply would try to create one without a spec.
  if (!pvc || isTerminating(pvc)) return;
  await cluster.apply(buildWeightsRecord(model, slot), WEIGHTS_FIELD_MANAGER);
}
