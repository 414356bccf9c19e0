import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from '../../../activities/cluster/api';
import { buildDeployment, FIELD_MANAGER, pvcName, rootName } from '../../../activities/builders';
import { createActivities } from '../../../activities/create-activities';
import { FAILURE, type FerryActivities, type ServedModel } from '../../../workflows/contract';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env';
import {
  adminKubeConfig,
  clientsFor,
  createNamespace,
  deleteNamespace,
  restrictedPod,
  waitFor,
  type Clients,
} from '../../support/kube';

// Objects that are being deleted when a model claims its name. Someone else's: wait until the name is free. Our own
// PVC stuck behind `kubernetes.io/pvc-protection` (a person deleted it while a pod mounts it): Ferry's own pods let
// go of it; a pod of someone else makes the claim fail with VolumeTerminating, touching nothing.
let c: Clients;
let ns: string;
let cluster: Cluster;
let acts: FerryActivities;

beforeAll(async () => {
  c = clientsFor(adminKubeConfig());
  ns = await createNamespace(c, 'act-claim', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  const deps = testDeps();
  cluster = deps.cluster;
  acts = createActivities(deps);
});
afterAll(async () => deleteNamespace(c, ns));

const readPvc = (model: string) =>
  c.core.readNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: ns }).catch(() => undefined);

/** Claims the name and provisions the volume; returns the root's uid. */
async function provisioned(model: ServedModel): Promise<string> {
  const claim = await activity(acts.claimName, { model });
  await activity(acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
  return claim.rootUid;
}

async function runningPod(labelSelector: string): Promise<string> {
  return waitFor(`a running pod ${labelSelector}`, 30_000, async () => {
    const pods = await c.core.listNamespacedPod({ namespace: ns, labelSelector });
    return pods.items.find((p) => p.status?.phase === 'Running')?.metadata?.name;
  });
}

/** Deletes the PVC as a person would, and waits until pvc-protection holds it in Terminating. */
async function deleteStuck(model: string): Promise<V1PersistentVolumeClaim> {
  await c.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: ns });
  const pvc = await readPvc(model);
  expect(pvc?.metadata?.deletionTimestamp).toBeDefined();
  expect(pvc?.metadata?.finalizers).toContain('kubernetes.io/pvc-protection');
  return pvc!;
}

describe.concurrent('claiming while objects are being deleted', () => {
  it('our PVC held by our puller: deletes the puller, waits for the PVC to go, and claims', async () => {
    const model = testModel('stuck-pull', ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const rootUid = await provisioned(model);
    const { jobName } = await activity(acts.startPuller, { model, rootUid, sourceHash: '' });
    await runningPod(`job-name=${jobName}`);
    await deleteStuck('stuck-pull');

    const run = runActivity(acts.claimName, { model });
    const claim = await run.result;
    expect(claim.rootUid).toBe(rootUid);
    expect(claim.resumed).toEqual([`ConfigMap/${rootName('stuck-pull')}`]);
    expect(run.heartbeats.find((h) => h.state === 'WaitingForDeletion')).toMatchObject({
      step: 'claim',
      message: expect.stringContaining("asked Ferry's pods"),
    });
    expect(await readPvc('stuck-pull')).toBeUndefined();
    await expect(c.batch.readNamespacedJob({ name: jobName, namespace: ns })).rejects.toMatchObject({ code: 404 });

    // The next step provisions a fresh volume.
    const storage = await activity(acts.applyStorage, { model, rootUid, sourceHash: claim.sourceHash });
    expect(storage).toMatchObject({ phase: 'Bound', holdsSource: false });
  });

  it('our PVC held by our engine: scales the engine to 0, waits for the PVC to go, and claims', async () => {
    const model = testModel('stuck-engine', ns, { spec: { resources: { gpus: 0 } } });
    const rootUid = await provisioned(model);
    await cluster.apply(buildDeployment(model, { rootUid }), FIELD_MANAGER);
    await runningPod('app.kubernetes.io/instance=stuck-engine,app.kubernetes.io/component=engine');
    await deleteStuck('stuck-engine');

    const claim = await activity(acts.claimName, { model });
    expect(claim.resumed.sort()).toEqual([`ConfigMap/${rootName('stuck-engine')}`, 'Deployment/stuck-engine']);
    expect(await readPvc('stuck-engine')).toBeUndefined();
    const deployment = await c.apps.readNamespacedDeployment({ name: 'stuck-engine', namespace: ns });
    expect(deployment.spec?.replicas).toBe(0);
  });

  it("our PVC held by someone else's pod: VolumeTerminating names the pod, which is left alone", async () => {
    const model = testModel('stuck-foreign', ns);
    await provisioned(model);
    const pod = restrictedPod('someone-elses', {
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: pvcName('stuck-foreign') } }],
    });
    pod.spec!.containers[0]!.volumeMounts = [{ name: 'data', mountPath: '/data' }];
    await c.core.createNamespacedPod({ namespace: ns, body: pod });
    await waitFor('the foreign pod running', 30_000, async () => {
      const p = await c.core.readNamespacedPod({ name: 'someone-elses', namespace: ns });
      return p.status?.phase === 'Running';
    });
    const before = await c.core.readNamespacedPod({ name: 'someone-elses', namespace: ns });
    await deleteStuck('stuck-foreign');

    const err = (await rejectionOf(activity(acts.claimName, { model }))) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.VolumeTerminating);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain(`while pod ${ns}/someone-elses (not Ferry's) mounts it`);
    const after = await c.core.readNamespacedPod({ name: 'someone-elses', namespace: ns });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect((await readPvc('stuck-foreign'))?.metadata?.deletionTimestamp).toBeDefined();
    await c.core.deleteNamespacedPod({ name: 'someone-elses', namespace: ns });
  });

  it('a PVC of someone else being deleted: waits until the name is free, then claims', async () => {
    const model = testModel('inherit', ns);
    await c.core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name: pvcName('inherit'), finalizers: ['example.com/backup'] },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    await c.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName('inherit'), namespace: ns });

    const run = runActivity(acts.claimName, { model });
    await waitFor('a WaitingForDeletion heartbeat', 10_000, async () =>
      run.heartbeats.some((h) => h.state === 'WaitingForDeletion'),
    );
    // Still waiting: nothing of the model was written.
    await expect(c.core.readNamespacedConfigMap({ name: rootName('inherit'), namespace: ns })).rejects.toMatchObject({
      code: 404,
    });
    await cluster.mergePatch(
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: pvcName('inherit'), namespace: ns },
      { metadata: { finalizers: null } },
    );
    const claim = await run.result;
    expect(claim.resumed).toEqual([]);
    expect(await readPvc('inherit')).toBeUndefined();
  });

  it('a PVC of someone else that stays terminating: retryable failure naming its finalizer', async () => {
    const quick = createActivities(testDeps({ terminatingPvcWaitMs: 1_500 }));
    const model = testModel('stubborn', ns);
    await c.core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name: pvcName('stubborn'), finalizers: ['example.com/backup'] },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    await c.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName('stubborn'), namespace: ns });

    const err = (await rejectionOf(activity(quick.claimName, { model }))) as unknown as ApplicationFailure;
    expect(err.type).toBe('ObjectsTerminating');
    expect(err.nonRetryable).toBe(false);
    expect(err.message).toContain(`PersistentVolumeClaim ${ns}/${pvcName('stubborn')} is still being deleted`);
    expect(err.message).toContain('finalizers: example.com/backup');
    await cluster.mergePatch(
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: pvcName('stubborn'), namespace: ns },
      { metadata: { finalizers: null } },
    );
  });
});
