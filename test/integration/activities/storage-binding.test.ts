import { randomBytes } from 'node:crypto';
import { PatchStrategy, setHeaderOptions, StorageV1Api } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvcName } from '../../../activities/builders/index.js';
import { createActivities } from '../../../activities/create-activities.js';
import { FAILURE } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env.js';
import { useNamespace } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// A volume that does not bind at once: applyStorage never blocks on it, and says why it is pending.
const env = useNamespace('act-binding');
let storage: StorageV1Api;
const lateClass = `ferry-test-late-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  storage = env.kc.makeApiClient(StorageV1Api);
  await storage.createStorageClass({
    body: {
      metadata: { name: lateClass },
      provisioner: 'kwok.x-k8s.io/volume',
      volumeBindingMode: 'WaitForFirstConsumer',
    },
  });
});
afterAll(async () => {
  await storage.deleteStorageClass({ name: lateClass }).catch(() => undefined);
});

describe.concurrent('a volume that is not bound yet', () => {
  it('WaitForFirstConsumer: Pending at once; the puller then reports what the volume waits for', async () => {
    const acts = createActivities(testDeps({ volumeBindGraceMs: 20_000 }));
    const model = testModel('late', env.ns, { spec: { storage: { storageClassName: lateClass } } });
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };

    const startedAt = Date.now();
    expect(await activity(acts.applyStorage, input)).toEqual({
      pvcName: pvcName('late'),
      phase: 'Pending',
      holdsSource: false,
    });
    expect(Date.now() - startedAt).toBeLessThan(10_000);

    // The scheduler picks a node for the puller and asks for the volume there; the simulated provisioner never
    // provisions such a volume, which is how a broken provisioner looks: the download waits and says why.
    const { jobName } = await activity(acts.startPuller, input);
    const run = runActivity(acts.awaitPuller, { model, jobName });
    const beat = await waitFor('a VolumePending heartbeat', 20_000, async () =>
      run.heartbeats.find((h) => h.state === 'VolumePending' && h.message?.includes('external provisioner')),
    );
    expect(beat.message).toContain(`volume ${pvcName('late')} is not bound yet: Waiting for a volume to be created`);
    run.env.cancel();
    await rejectionOf(run.result);
  });

  it('a class that does not exist: Pending, and the ProvisioningFailed warning reaches progress', async () => {
    const acts = createActivities(testDeps({ volumeBindGraceMs: 3_000 }));
    const model = testModel('classless', env.ns, {
      spec: { storage: { storageClassName: 'ferry-test-no-such-class' } },
    });
    const claim = await activity(acts.claimName, { model });
    const run = runActivity(acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    expect(await run.result).toMatchObject({ phase: 'Pending', holdsSource: false });
    expect(run.heartbeats.at(-1)).toEqual({
      step: 'storage',
      state: 'ProvisioningFailed',
      message: expect.stringContaining('"ferry-test-no-such-class" not found'),
    });
  });

  it('a bound volume whose PV was forced away: Lost, a non-retryable VolumeLost naming the PV', async () => {
    const acts = createActivities(testDeps());
    const model = testModel('lost', env.ns);
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    expect(await activity(acts.applyStorage, input)).toMatchObject({ phase: 'Bound' });
    const bound = await env.core.readNamespacedPersistentVolumeClaim({ name: pvcName('lost'), namespace: env.ns });
    const volume = bound.spec!.volumeName!;

    // pv-protection holds a bound PV; someone forcing it away (or a restore that lacks it) leaves the claim Lost.
    await env.core.deletePersistentVolume({ name: volume });
    await env.core.patchPersistentVolume(
      { name: volume, body: { metadata: { finalizers: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await waitFor('the claim Lost', 60_000, async () => {
      const p = await env.core.readNamespacedPersistentVolumeClaim({ name: pvcName('lost'), namespace: env.ns });
      return p.status?.phase === 'Lost';
    });
    const err = (await rejectionOf(activity(acts.applyStorage, input))) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.VolumeLost);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain(
      `volume ${env.ns}/${pvcName('lost')} is Lost: its PersistentVolume ${volume} no longer`,
    );
  });
});
