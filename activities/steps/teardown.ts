// tearDown: deletes every object a model could own, each on its own: 404 is done, one failure never stops the
// others, and every failure is reported in one retryable TeardownIncomplete (never a false "deleted"). Only objects
// with this model's labels are touched. A retained volume stays, labelled, without the owner reference that would
// let the garbage collector take it along with the root.
import type { KubernetesObject, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import {
  FAILURE,
  failure,
  type ModelInput,
  type ServedModel,
  type TeardownResult,
} from '../../workflows/contract/index.js';
import type { ObjectRef } from '../cluster/api.js';
import type { ActivityDeps } from '../deps.js';
import {
  admissionConfigMapName,
  deploymentName,
  hasAdmission,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  inferencePoolName,
  LABEL_COMPONENT,
  modelLabelSelector,
  networkPolicyName,
  onSharedCache,
  pvcName,
  rootName,
  serviceName,
  slotBase,
  weightsClaim,
} from '../builders/index.js';
import { isOurs, isTerminating } from '../readers/ownership.js';
import { leaveCache } from '../cluster/cache.js';
import { frontRefs } from './front.js';

/** One object that could not be deleted, and why. */
interface TeardownFailure {
  object: string;
  error: string;
}

const ref = (model: ServedModel, apiVersion: string, kind: string, name: string): ObjectRef => ({
  apiVersion,
  kind,
  name,
  namespace: model.metadata.namespace,
});

export async function tearDown(deps: ActivityDeps, { model }: ModelInput): Promise<TeardownResult> {
  const { cluster } = deps;
  const name = model.metadata.name;
  const deleted: string[] = [];
  const retained: string[] = [];
  const failures: TeardownFailure[] = [];
  const log = Context.current().log;

  const attempt = async (object: string, run: () => Promise<void>): Promise<boolean> => {
    try {
      await run();
      return true;
    } catch (err) {
      failures.push({ object, error: describeError(err) });
      return false;
    }
  };

  /**
   * Deletes the object if it is ours (only that very object: uid precondition); gone or terminating counts as done.
   * `known` is the object as already read (`null`: read and absent); without it the object is read first.
   */
  const deleteOurs = async (target: ObjectRef, known?: KubernetesObject | null): Promise<void> => {
    const label = `${target.kind}/${target.name}`;
    const obj = known === undefined ? await cluster.get(target) : known;
    if (obj && !isOurs(obj, model)) {
      log.warn(`not deleting ${label}: it does not carry model ${name}'s labels`);
      return;
    }
    if (obj && !isTerminating(obj)) await cluster.delete(target, 'Background', { uid: obj.metadata?.uid });
    deleted.push(label);
  };

  // Everything that can run at once does: under API faults each request on the longest chain can cost a
  // Retry-After, so the chain is kept to a read and a delete per object, plus the root's delete at the end.
  const rootRef = ref(model, 'v1', 'ConfigMap', rootName(name));
  // The root is read now, beside the rest; its uid guards the delete that ends the teardown.
  const rootRead = cluster.get(rootRef).then(
    (obj) => ({ obj: obj ?? null }),
    (err: unknown) => ({ err }),
  );

  // A retained PVC must lose its owner reference before the root goes, or the GC takes it along with the root.
  const volumeOf = (pvcRef: ObjectRef) =>
    attempt(`PersistentVolumeClaim/${pvcRef.name}`, async () => {
      const pvc = await cluster.get<V1PersistentVolumeClaim>(pvcRef);
      if (!model.spec.storage.retainOnDelete) return deleteOurs(pvcRef, pvc ?? null);
      if (!pvc || !isOurs(pvc, model)) return;
      const owners = pvc.metadata?.ownerReferences ?? [];
      const kept = owners.filter((o) => !(o.kind === 'ConfigMap' && o.name === rootName(name)));
      if (kept.length !== owners.length) {
        // Conditional on the resourceVersion read: a concurrent change is a 409 and a retry, not a lost update.
        await cluster.mergePatch(pvcRef, {
          metadata: { resourceVersion: pvc.metadata?.resourceVersion, ownerReferences: kept.length ? kept : null },
        });
      }
      retained.push(`PersistentVolumeClaim/${pvcRef.name}`);
    });
  // On a shared cache the model leaves it: the last user out deletes the volume (and the cache's Job, which it owns)
  // unless it retains; the volume never names the root as owner, so the root is safe to delete either way.
  const leave = () =>
    attempt(`PersistentVolumeClaim/${weightsClaim(model)}`, async () => {
      const left = await leaveCache(cluster, model, name, model.spec.storage.retainOnDelete);
      if (left === 'deleted') deleted.push(`PersistentVolumeClaim/${weightsClaim(model)}`);
      if (left === 'retained' || left === 'left') retained.push(`PersistentVolumeClaim/${weightsClaim(model)}`);
    }).then(() => []);
  const pvcRef = ref(model, 'v1', 'PersistentVolumeClaim', pvcName(name));
  // A revision may be in slot b (docs/design/rollout.md, section 2), with or without a front now: its objects too,
  // those that are there.
  const slotB = slotBase(name, 'b');
  const slotBVolume = ref(model, 'v1', 'PersistentVolumeClaim', pvcName(slotB));
  // The volumes a failure kept from losing the root as owner (the root must stay while one does).
  const unsafe = (target: ObjectRef) => volumeOf(target).then((safe) => (safe ? [] : [target.name]));
  const volume = Promise.all([
    onSharedCache(model) ? leave() : unsafe(pvcRef),
    // A read that fails keeps the root (as a failed attempt does), and the teardown is tried again.
    cluster.get(slotBVolume).then(
      (found) => (found ? unsafe(slotBVolume) : []),
      (err: unknown) => {
        failures.push({ object: `PersistentVolumeClaim/${slotBVolume.name}`, error: describeError(err) });
        return [slotBVolume.name];
      },
    ),
  ]).then((kept) => kept.flat());
  const ifThere = (target: ObjectRef) =>
    attempt(`${target.kind}/${target.name}`, async () => {
      const found = await cluster.get(target);
      if (found) await deleteOurs(target, found);
    });

  // The weights' puller and the LoRA adapters' Job alike.
  const pullerSelector = `${modelLabelSelector(name)},${LABEL_COMPONENT} in (puller,adapters)`;
  const listPullers = (apiVersion: string, kind: string) =>
    cluster
      .list(apiVersion, kind, model.metadata.namespace, { labelSelector: pullerSelector })
      .catch((err: unknown) => void failures.push({ object: `${kind} (puller)`, error: describeError(err) }));
  const [unsafeVolumes] = await Promise.all([
    volume,
    attempt(`Deployment/${deploymentName(name)}`, () =>
      deleteOurs(ref(model, 'apps/v1', 'Deployment', deploymentName(name))),
    ),
    attempt(`Service/${serviceName(name)}`, () => deleteOurs(ref(model, 'v1', 'Service', serviceName(name)))),
    ifThere(ref(model, 'apps/v1', 'Deployment', deploymentName(slotB))),
    ifThere(ref(model, 'v1', 'Service', serviceName(slotB))),
    ifThere(ref(model, 'v1', 'ConfigMap', admissionConfigMapName(slotB))),
    // The front the spec asks for; one an update dropped went with that update's applyEngine.
    ...(model.spec.front ? frontRefs(model).map((r) => attempt(`${r.kind}/${r.name}`, () => deleteOurs(r))) : []),
    // A pool the spec asks for; one an update dropped went with that update's applyEngine.
    ...(model.spec.inferencePool
      ? [
          attempt(`InferencePool/${inferencePoolName(name)}`, async () => {
            if (await cluster.serves(INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND)) {
              await deleteOurs(ref(model, INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND, inferencePoolName(name)));
            }
          }),
        ]
      : []),
    // A worker with the setting on (its Role may touch NetworkPolicies); one left by a worker that had it goes with
    // the root (its owner reference).
    ...(deps.networkPolicy
      ? [
          attempt(`NetworkPolicy/${networkPolicyName(name)}`, () =>
            deleteOurs(ref(model, 'networking.k8s.io/v1', 'NetworkPolicy', networkPolicyName(name))),
          ),
        ]
      : []),
    // Whether or not the spec still asks for admission (an update may have turned it off and left the ConfigMap);
    // a model that never had one is not said to have lost it.
    attempt(`ConfigMap/${admissionConfigMapName(name)}`, async () => {
      const target = ref(model, 'v1', 'ConfigMap', admissionConfigMapName(name));
      const found = await cluster.get(target);
      if (found || hasAdmission(model)) await deleteOurs(target, found ?? null);
    }),
    (async () => {
      // Both lists at once, but Jobs are deleted before their pods: a Job that still exists would replace a
      // deleted pod. A pod a Job creates after the list is the Job's, and goes with it.
      const [jobs, pods] = await Promise.all([listPullers('batch/v1', 'Job'), listPullers('v1', 'Pod')]);
      await Promise.all(
        (jobs ?? []).map((job) =>
          attempt(`Job/${job.metadata?.name}`, () =>
            deleteOurs(ref(model, 'batch/v1', 'Job', job.metadata!.name!), job),
          ),
        ),
      );
      await Promise.all(
        (pods ?? []).map((pod) =>
          attempt(`Pod/${pod.metadata?.name}`, () => deleteOurs(ref(model, 'v1', 'Pod', pod.metadata!.name!), pod)),
        ),
      );
    })(),
  ]);

  // The root last: deleting it releases the name and garbage-collects whatever still names it as owner.
  const root = await rootRead;
  if (unsafeVolumes.length > 0) {
    failures.push({
      object: `ConfigMap/${rootRef.name}`,
      error: `kept: the retained PersistentVolumeClaim/${unsafeVolumes.join(', PersistentVolumeClaim/')} still names it as owner, and deleting it would let the garbage collector delete the volume`,
    });
  } else if ('err' in root) {
    failures.push({ object: `ConfigMap/${rootRef.name}`, error: describeError(root.err) });
  } else {
    await attempt(`ConfigMap/${rootRef.name}`, () => deleteOurs(rootRef, root.obj));
  }

  if (failures.length > 0) {
    throw failure(
      FAILURE.TeardownIncomplete,
      `teardown of ${model.metadata.namespace}/${name} is incomplete: ${failures.map((f) => `${f.object}: ${f.error}`).join('; ')}`,
      { deleted, retained, failures },
    );
  }
  return { deleted, retained };
}

function describeError(err: unknown): string {
  if (err instanceof ApplicationFailure) {
    const status = (err.details?.[0] as { status?: number | null } | undefined)?.status;
    return status ? `HTTP ${status} ${err.type}: ${err.message}` : `${err.type ?? 'Error'}: ${err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}
