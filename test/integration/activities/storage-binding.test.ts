import { randomBytes } from 'node:crypto';
import { StorageV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvcName } from '../../../activities/kube';
import { createStorageActivities } from '../../../activities/storage-activities';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env';
import {
  adminKubeConfig,
  clientsFor,
  createNamespace,
  deleteNamespace,
  waitFor,
  type Clients,
} from '../../support/kube';

// A volume that does not bind at once: applyStorage never blocks on it, and says why it is pending.
let c: Clients;
let ns: string;
let storage: StorageV1Api;
const lateClass = `ferry-test-late-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  c = clientsFor(adminKubeConfig());
  ns = await createNamespace(c, 'act-binding');
  storage = c.kc.makeApiClient(StorageV1Api);
  await storage.createStorageClass({
    body: {
      metadata: { name: lateClass },
      provisioner: 'kwok.x-k8s.io/volume',
      volumeBindingMode: 'WaitForFirstConsumer',
    },
  });
});
afterAll(async () => {
  await deleteNamespace(c, ns);
  await storage.deleteStorageClass({ name: lateClass }).catch(() => undefined);
});

describe.concurrent('a volume that is not bound yet', () => {
  it('WaitForFirstConsumer: Pending at once; the puller then reports what the volume waits for', async () => {
    const acts = createStorageActivities(testDeps({ volumeBindGraceMs: 20_000 }));
    const model = testModel('late', ns, { spec: { storage: { storageClassName: lateClass } } });
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
    const acts = createStorageActivities(testDeps({ volumeBindGraceMs: 3_000 }));
    const model = testModel('classless', ns, { spec: { storage: { storageClassName: 'ferry-test-no-such-class' } } });
    const claim = await activity(acts.claimName, { model });
    const run = runActivity(acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    expect(await run.result).toMatchObject({ phase: 'Pending', holdsSource: false });
    expect(run.heartbeats.at(-1)).toEqual({
      step: 'download',
      state: 'ProvisioningFailed',
      message: expect.stringContaining('"ferry-test-no-such-class" not found'),
    });
  });
});
