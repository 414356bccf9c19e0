// Our PVC stuck terminating: a person deleted it while a pod still mounts it, and the `kubernetes.io/pvc-protection`
// finalizer keeps it until no scheduled pod uses it. Waiting would never end while our own engine or puller holds it.
//
// Decision: the volume is being deleted on purpose and its weights go with it, so the model must start over on a fresh
// volume (applyStorage recreates it). When every pod holding it is ours, Ferry lets go: it scales the engine
// Deployment to 0 (deleting its pods alone is not enough: the ReplicaSet would replace them, and a replacement could
// land on the fresh, empty volume and hold it against the puller), deletes the puller Job, and deletes the pods; the
// caller then waits for the PVC to be gone. When any holder is someone else's pod, Ferry touches nothing and fails
// with the non-retryable `VolumeTerminating` naming it: only its owner can decide to stop it.
import type { V1Deployment, V1Job, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { FAILURE, failure, type ServedModel } from '../../workflows/contract/index.js';
import type { Cluster } from '../cluster/api.js';
import { deploymentName, LABEL_COMPONENT, pvcName, slotBase } from '../builders/index.js';
import { isModelsOwn, isOurs } from '../readers/ownership.js';

const JOB_NAME_LABELS = ['batch.kubernetes.io/job-name', 'job-name'];

/**
 * The pods that keep the pvc-protection finalizer on `pvc`: scheduled pods that mount it (the controller ignores
 * pods that are not scheduled, since no kubelet will start them on a terminating claim).
 */
async function podsHolding(cluster: Cluster, pvc: V1PersistentVolumeClaim): Promise<V1Pod[]> {
  const namespace = pvc.metadata!.namespace!;
  const name = pvc.metadata!.name!;
  const pods = await cluster.list<V1Pod>('v1', 'Pod', namespace);
  const mounts = (p: V1Pod) => (p.spec?.volumes ?? []).some((v) => v.persistentVolumeClaim?.claimName === name);
  return pods.filter((p) => Boolean(p.spec?.nodeName) && mounts(p));
}

/**
 * Makes our pods let go of our terminating PVC, or throws `VolumeTerminating` when a pod of someone else holds it.
 * Returns the names of the pods it asked to go (empty when nothing holds the volume: the finalizer goes by itself).
 * Idempotent: run it on every look while waiting for the PVC to disappear.
 */
export async function releaseTerminatingPvc(
  cluster: Cluster,
  model: ServedModel,
  pvc: V1PersistentVolumeClaim,
): Promise<string[]> {
  const namespace = model.metadata.namespace;
  const holders = await podsHolding(cluster, pvc);
  // Another model's pod on a shared cache is not this model's to stop; one already being deleted goes by itself.
  const foreign = holders.filter((p) => !isModelsOwn(p, model) && !p.metadata?.deletionTimestamp);
  if (foreign.length > 0) {
    const names = foreign.map((p) => `${namespace}/${p.metadata?.name}`).join(', ');
    throw failure(
      FAILURE.VolumeTerminating,
      `volume ${namespace}/${pvc.metadata?.name} of model ${model.metadata.name} is being deleted but cannot go ` +
        `while pod ${names} (not Ferry's) mounts it (kubernetes.io/pvc-protection); stop that pod, then start the ` +
        'model again',
      { pvc: pvc.metadata?.name, pods: foreign.map((p) => p.metadata?.name) },
    );
  }
  if (holders.length === 0) return [];

  if (holders.some((p) => p.metadata?.labels?.[LABEL_COMPONENT] === 'engine')) {
    // The engine of whichever slot mounts it (docs/design/rollout.md, section 2).
    const claimed = pvc.metadata?.name === pvcName(slotBase(model.metadata.name, 'b')) ? 'b' : undefined;
    const name = deploymentName(slotBase(model.metadata.name, claimed));
    const ref = { apiVersion: 'apps/v1', kind: 'Deployment', name, namespace };
    const deployment = await cluster.get<V1Deployment>(ref);
    if (deployment && isOurs(deployment, model) && deployment.spec?.replicas !== 0) {
      await cluster.mergePatch(ref, { spec: { replicas: 0 } });
    }
  }
  const jobs = new Set(
    holders.flatMap((p) => JOB_NAME_LABELS.map((l) => p.metadata?.labels?.[l]).filter((j): j is string => !!j)),
  );
  for (const name of jobs) {
    const ref = { apiVersion: 'batch/v1', kind: 'Job', name, namespace };
    const job = await cluster.get<V1Job>(ref);
    if (job && isOurs(job, model)) await cluster.delete(ref, 'Background', { uid: job.metadata?.uid });
  }
  for (const pod of holders) {
    if (pod.metadata?.deletionTimestamp) continue;
    await cluster.delete({ apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, namespace }, 'Background', {
      uid: pod.metadata?.uid,
    });
  }
  return holders.map((p) => p.metadata!.name!);
}
