// The model's weights volume: applied under Ferry's field manager, and asked which weights it already holds.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { refOf } from '../cluster/api.js';
import { timingOf, type ActivityDeps } from '../deps.js';
import { buildPvc, FIELD_MANAGER, holdsWeightsFor, onSharedCache } from '../builders/index.js';
import { joinCache } from '../cluster/cache.js';
import { assertOurs, isTerminating } from '../readers/ownership.js';
import { ProgressReporter } from '../cluster/progress.js';
import {
  FAILURE,
  failure,
  type ObjectsInput,
  type ServedModel,
  type StorageResult,
} from '../../workflows/contract/index.js';
import { bindsOnFirstConsumer, pendingVolumeProblem } from '../readers/volume.js';
import { volumeEvents } from '../cluster/model-reads.js';
import { waitFor } from '../cluster/wait.js';

/**
 * Applies the PVC (labelled from the first apply; owned by the root unless `retainOnDelete`) and reports whether it
 * already holds the source's weights. A Pending claim gets `volumeBindGraceMs` to bind; why it is still pending
 * (ProvisioningFailed and other warnings that live only in Events) goes to progress, and the phase is returned: with
 * WaitForFirstConsumer storage it binds only when the puller's pod lands, so this step must not block on it. On a
 * shared cache the model joins its source's cache volume instead (activities/cluster/cache.ts).
 */
export async function applyStorage(deps: ActivityDeps, { model, rootUid, slot }: ObjectsInput): Promise<StorageResult> {
  const { cluster } = deps;
  // On a shared cache: join it (its volume created by the first model), never apply it (docs/design/cache.md).
  if (onSharedCache(model)) return storageResult(deps, model, await joinCache(cluster, model, model.metadata.name));
  const desired = buildPvc(model, { rootUid, ...(slot ? { slot } : {}) });
  const ref = refOf(desired);
  const existing = assertOurs(model, await cluster.get<V1PersistentVolumeClaim>(ref));
  if (existing && isTerminating(existing)) {
    // claimName waits such a volume out; seeing one here means it was deleted since. Applying would revive nothing.
    throw failure(
      FAILURE.VolumeBeingDeleted,
      `volume ${ref.namespace}/${ref.name} is being deleted; it is created again once it is gone`,
    );
  }
  return storageResult(deps, model, await cluster.apply(desired, FIELD_MANAGER));
}

/** The volume bound (or given its grace to bind), refused when Lost, and whether it holds the source's weights. */
async function storageResult(
  deps: ActivityDeps,
  model: ServedModel,
  applied: V1PersistentVolumeClaim,
): Promise<StorageResult> {
  const ref = refOf(applied);
  let pvc = applied;
  if (phaseOf(pvc) === 'Pending') pvc = await awaitBinding(deps, pvc);
  if (phaseOf(pvc) === 'Lost') {
    // The PV controller's verdict when a bound claim's volume was deleted. No retry brings the data back, and no pod
    // can mount the claim: only deleting it (a teardown, or by hand for a retained volume) makes room for a new one.
    throw failure(
      FAILURE.VolumeLost,
      `volume ${ref.namespace}/${ref.name} is Lost: its PersistentVolume ${pvc.spec?.volumeName ?? '(unnamed)'} ` +
        'no longer exists. Delete the model (or the claim) and serve it again to provision a new volume',
    );
  }
  return { pvcName: ref.name, phase: phaseOf(pvc), holdsSource: holdsWeightsFor(pvc, model) };
}

const phaseOf = (pvc: V1PersistentVolumeClaim): string => pvc.status?.phase ?? 'Pending';

async function awaitBinding(deps: ActivityDeps, applied: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
  const { cluster } = deps;
  const timing = timingOf(deps);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const ref = refOf(applied);
  let latest = applied;
  const report = async (): Promise<boolean> => {
    const events = await volumeEvents(cluster, ref.namespace!, ref.name);
    if (bindsOnFirstConsumer(events)) return true;
    const problem = pendingVolumeProblem(ref.name, events);
    await reporter.report({ step: 'storage', state: problem.reason, message: problem.message });
    return false;
  };
  const bound = await waitFor(cluster, {
    signal: Context.current().cancellationSignal,
    pollMs: timing.pollMs,
    deadline: Date.now() + timing.volumeBindGraceMs,
    watches: [
      {
        path: `/api/v1/namespaces/${ref.namespace}/persistentvolumeclaims`,
        query: { fieldSelector: `metadata.name=${ref.name}` },
      },
    ],
    check: async (trigger) => {
      latest = (await cluster.get<V1PersistentVolumeClaim>(ref)) ?? latest;
      if (phaseOf(latest) !== 'Pending') return latest;
      // Binding is deferred to the first pod: nothing to wait for here.
      if (trigger !== 'change' && (await report())) return latest;
      return undefined;
    },
  });
  if (bound) return bound;
  await report();
  return latest;
}
