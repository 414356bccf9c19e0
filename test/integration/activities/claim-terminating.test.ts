import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { buildDeployment, FIELD_MANAGER, pvcName, rootName } from '../../../activities/builders/index.js';
import { createActivities } from '../../../activities/create-activities.js';
import { FAILURE, type ServedModel } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

// Objects that are being deleted when a model claims its name. Someone else's: wait until the name is free. Our own
// PVC stuck behind `kubernetes.io/pvc-protection` (a person deleted it while a pod mounts it): Ferry's own pods let
// go of it; a pod of someone else makes the claim fail with VolumeTerminating, touching nothing.
const env = useActivityEnv('act-claim', { labels: RESTRICTED });

const readPvc = (model: string) =>
  env.core.readNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: env.ns }).catch(() => undefined);

/** Claims the name and provisions the volume; returns the root's uid. */
async function provisioned(model: ServedModel): Promise<string> {
  const claim = await activity(env.acts.claimName, { model });
  await activity(env.acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
  return claim.rootUid;
}

async function runningPod(labelSelector: string): Promise<string> {
  return waitFor(`a running pod ${labelSelector}`, 30_000, async () => {
    const pods = await env.core.listNamespacedPod({ namespace: env.ns, labelSelector });
    return pods.items.find((p) => p.status?.phase === 'Running')?.metadata?.name;
  });
}

/** Deletes the PVC as a person would, and waits until pvc-protection holds it in Terminating. */
async function deleteStuck(model: string): Promise<V1PersistentVolumeClaim> {
  await env.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: env.ns });
  const pvc = await readPvc(model);
  expect(pvc?.metadata?.deletionTimestamp).toBeDefined();
  expect(pvc?.metadata?.finalizers).toContain('kubernetes.io/pvc-protection');
  return pvc!;
}

/** A PVC of someone else under the model's volume name, deleted but held by a finalizer of theirs. */
async function foreignPvcBeingDeleted(model: string): Promise<void> {
  await env.core.createNamespacedPersistentVolumeClaim({
    namespace: env.ns,
    body: {
      metadata: { name: pvcName(model), finalizers: ['example.com/backup'] },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    },
  });
  await env.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: env.ns });
}

/** Lets the PVC of `foreignPvcBeingDeleted` go, as its owner would. */
async function dropFinalizers(model: string): Promise<void> {
  await env.cluster.mergePatch(
    { apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: pvcName(model), namespace: env.ns },
    { metadata: { finalizers: null } },
  );
}

describe.concurrent('claiming while objects are being deleted', () => {
  it('our PVC held by our puller: deletes the puller, waits for the PVC to go, and claims', async () => {
    const model = testModel('stuck-pull', env.ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const rootUid = await provisioned(model);
    const { jobName } = await activity(env.acts.startPuller, { model, rootUid, sourceHash: '' });
    await runningPod(`job-name=${jobName}`);
    await deleteStuck('stuck-pull');

    const run = runActivity(env.acts.claimName, { model });
    const claim = await run.result;
    expect(claim.rootUid).toBe(rootUid);
    expect(claim.resumed).toEqual([`ConfigMap/${rootName('stuck-pull')}`]);
    expect(run.heartbeats.find((h) => h.state === 'WaitingForDeletion')).toMatchObject({
      step: 'claim',
      message: expect.stringContaining("asked Ferry's pods"),
    });
    expect(await readPvc('stuck-pull')).toBeUndefined();
    await expect(env.batch.readNamespacedJob({ name: jobName, namespace: env.ns })).rejects.toMatchObject({
      code: 404,
    });

    // The next step provisions a fresh volume.
    const storage = await activity(env.acts.applyStorage, { model, rootUid, sourceHash: claim.sourceHash });
    expect(storage).toMatchObject({ phase: 'Bound', holdsSource: false });
  });

  it('our PVC held by our engine: scales the engine to 0, waits for the PVC to go, and claims', async () => {
    const model = testModel('stuck-engine', env.ns, { spec: { resources: { gpus: 0 } } });
    const rootUid = await provisioned(model);
    await env.cluster.apply(buildDeployment(model, { rootUid }), FIELD_MANAGER);
    await runningPod('app.kubernetes.io/instance=stuck-engine,app.kubernetes.io/component=engine');
    await deleteStuck('stuck-engine');

    const claim = await activity(env.acts.claimName, { model });
    expect(claim.resumed.sort()).toEqual([`ConfigMap/${rootName('stuck-engine')}`, 'Deployment/stuck-engine']);
    expect(await readPvc('stuck-engine')).toBeUndefined();
    const deployment = await env.apps.readNamespacedDeployment({ name: 'stuck-engine', namespace: env.ns });
    expect(deployment.spec?.replicas).toBe(0);
  });

  it("our PVC held by someone else's pod: VolumeTerminating names the pod, which is left alone", async () => {
    const model = testModel('stuck-foreign', env.ns);
    await provisioned(model);
    const pod = restrictedPod('someone-elses', {
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: pvcName('stuck-foreign') } }],
    });
    pod.spec!.containers[0]!.volumeMounts = [{ name: 'data', mountPath: '/data' }];
    await env.core.createNamespacedPod({ namespace: env.ns, body: pod });
    await waitFor('the foreign pod running', 30_000, async () => {
      const p = await env.core.readNamespacedPod({ name: 'someone-elses', namespace: env.ns });
      return p.status?.phase === 'Running';
    });
    const before = await env.core.readNamespacedPod({ name: 'someone-elses', namespace: env.ns });
    await deleteStuck('stuck-foreign');

    const err = (await rejectionOf(activity(env.acts.claimName, { model }))) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.VolumeTerminating);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain(`while pod ${env.ns}/someone-elses (not Ferry's) mounts it`);
    const after = await env.core.readNamespacedPod({ name: 'someone-elses', namespace: env.ns });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect((await readPvc('stuck-foreign'))?.metadata?.deletionTimestamp).toBeDefined();
    await env.core.deleteNamespacedPod({ name: 'someone-elses', namespace: env.ns });
  });

  it('a PVC of someone else being deleted: waits until the name is free, then claims', async () => {
    const model = testModel('inherit', env.ns);
    await foreignPvcBeingDeleted('inherit');

    const run = runActivity(env.acts.claimName, { model });
    await waitFor('a WaitingForDeletion heartbeat', 10_000, async () =>
      run.heartbeats.some((h) => h.state === 'WaitingForDeletion'),
    );
    // Still waiting: nothing of the model was written.
    await expect(
      env.core.readNamespacedConfigMap({ name: rootName('inherit'), namespace: env.ns }),
    ).rejects.toMatchObject({ code: 404 });
    await dropFinalizers('inherit');
    const claim = await run.result;
    expect(claim.resumed).toEqual([]);
    expect(await readPvc('inherit')).toBeUndefined();
  });

  it('a PVC of someone else that stays terminating: retryable failure naming its finalizer', async () => {
    const quick = createActivities(testDeps({ terminatingPvcWaitMs: 1_500 }));
    const model = testModel('stubborn', env.ns);
    await foreignPvcBeingDeleted('stubborn');

    const err = (await rejectionOf(activity(quick.claimName, { model }))) as unknown as ApplicationFailure;
    expect(err.type).toBe('ObjectsTerminating');
    expect(err.nonRetryable).toBe(false);
    expect(err.message).toContain(`PersistentVolumeClaim ${env.ns}/${pvcName('stubborn')} is still being deleted`);
    expect(err.message).toContain('finalizers: example.com/backup');
    await dropFinalizers('stubborn');
  });
});
