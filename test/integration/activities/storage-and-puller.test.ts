import type { V1ConfigMap, V1Job, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import {
  ANNOTATION_WEIGHTS_SOURCE_HASH,
  FIELD_MANAGER,
  LABEL_MANAGED_BY,
  LABEL_MODEL,
  pullerJobName,
  pvcName,
  rootName,
  sourceHash,
  sourceHash8,
} from '../../../activities/builders/index.js';
import { FAILURE } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// The storage half of a model's life against the real API server and controllers, in a namespace that enforces Pod
// Security "restricted": the puller's pod must be admitted there for any download to complete.
const env = useActivityEnv('act-storage', { labels: RESTRICTED });

const readPvc = (model: string) =>
  env.core.readNamespacedPersistentVolumeClaim({ name: pvcName(model), namespace: env.ns });
const readRoot = (model: string) => env.core.readNamespacedConfigMap({ name: rootName(model), namespace: env.ns });
const jobPods = async (job: string) =>
  (await env.core.listNamespacedPod({ namespace: env.ns, labelSelector: `job-name=${job}` })).items;

describe('a download from claim to released volume', () => {
  it('claims, provisions, pulls in a restricted namespace, releases the volume and records the weights', async () => {
    const model = testModel('happy', env.ns);

    const claim = await activity(env.acts.claimName, { model });
    expect(claim).toEqual({ rootUid: expect.any(String), sourceHash: sourceHash(model.spec.source), resumed: [] });
    const root = await readRoot('happy');
    expect(root.metadata?.uid).toBe(claim.rootUid);
    expect(root.metadata?.labels).toMatchObject({ [LABEL_MANAGED_BY]: 'ferry', [LABEL_MODEL]: 'happy' });

    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    const storage = await activity(env.acts.applyStorage, input);
    expect(storage).toEqual({ pvcName: pvcName('happy'), phase: 'Bound', holdsSource: false });
    const pvc = await readPvc('happy');
    expect(pvc.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'ConfigMap', uid: claim.rootUid });

    const { jobName } = await activity(env.acts.startPuller, input);
    expect(jobName).toBe(pullerJobName('happy', sourceHash8(model.spec.source)));

    const run = runActivity(env.acts.awaitPuller, { model, jobName });
    const pulled = await run.result;
    expect(pulled.jobName).toBe(jobName);
    expect(pulled.durationMs).toBeGreaterThan(0);
    expect(run.heartbeats.length).toBeGreaterThan(0);
    expect(run.heartbeats.every((h) => h.step === 'download')).toBe(true);
    // The Job completed, so Pod Security "restricted" admitted its pod.
    const job = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(job.status?.succeeded).toBe(1);

    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash });
    expect(await jobPods(jobName)).toEqual([]);
    await expect(env.batch.readNamespacedJob({ name: jobName, namespace: env.ns })).rejects.toMatchObject({
      code: 404,
    });
    const recorded = await readPvc('happy');
    expect(recorded.metadata?.annotations?.[ANNOTATION_WEIGHTS_SOURCE_HASH]).toBe(claim.sourceHash);
    expect(recorded.metadata?.managedFields?.map((f) => f.manager)).toContain('ferry-weights');

    expect(await activity(env.acts.applyStorage, input)).toMatchObject({ holdsSource: true, phase: 'Bound' });
    // A released Job is not lost: the volume holds the weights, so awaiting it again succeeds at once.
    expect(await activity(env.acts.awaitPuller, { model, jobName })).toEqual({ jobName, durationMs: 0 });
    // A second claim resumes what is there: the root and the volume (the Job is gone).
    const again = await activity(env.acts.claimName, { model });
    expect(again.rootUid).toBe(claim.rootUid);
    expect(again.resumed.sort()).toEqual([
      `ConfigMap/${rootName('happy')}`,
      `PersistentVolumeClaim/${pvcName('happy')}`,
    ]);
  });

  it('changes nothing when each activity runs a second time', async () => {
    const model = testModel('twice', env.ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const claim = await activity(env.acts.claimName, { model });
    const rootRv = (await readRoot('twice')).metadata?.resourceVersion;
    const claim2 = await activity(env.acts.claimName, { model });
    expect(claim2.rootUid).toBe(claim.rootUid);
    expect(claim2.resumed).toEqual([`ConfigMap/${rootName('twice')}`]);
    expect((await readRoot('twice')).metadata?.resourceVersion).toBe(rootRv);

    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    const pvcRv = (await readPvc('twice')).metadata?.resourceVersion;
    expect(await activity(env.acts.applyStorage, input)).toMatchObject({ phase: 'Bound', holdsSource: false });
    expect((await readPvc('twice')).metadata?.resourceVersion).toBe(pvcRv);

    const { jobName } = await activity(env.acts.startPuller, input);
    const first = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    const ferryFields = (j: V1Job) => j.metadata?.managedFields?.find((f) => f.manager === FIELD_MANAGER);
    expect(await activity(env.acts.startPuller, input)).toEqual({ jobName });
    const second = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(second.metadata?.uid).toBe(first.metadata?.uid);
    expect(second.metadata?.generation).toBe(first.metadata?.generation);
    expect(ferryFields(second)).toEqual(ferryFields(first));

    // The pod runs until released; releasing twice deletes once and records nothing (abandoned download).
    await waitFor('the puller pod running', 30_000, async () =>
      (await jobPods(jobName)).some((p) => p.status?.phase === 'Running'),
    );
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash, abandon: true });
    expect(await jobPods(jobName)).toEqual([]);
    const releasedRv = (await readPvc('twice')).metadata?.resourceVersion;
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash, abandon: true });
    const after = await readPvc('twice');
    expect(after.metadata?.resourceVersion).toBe(releasedRv);
    expect(after.metadata?.annotations?.[ANNOTATION_WEIGHTS_SOURCE_HASH]).toBeUndefined();
  });

  it('resumes a retained volume that has no owner and keeps what it holds', async () => {
    const model = testModel('kept', env.ns, { spec: { storage: { retainOnDelete: true } } });
    const claim = await activity(env.acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    const { jobName } = await activity(env.acts.startPuller, input);
    await activity(env.acts.awaitPuller, { model, jobName });
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash });
    expect((await readPvc('kept')).metadata?.ownerReferences ?? []).toEqual([]);

    // The model is deleted (its root goes), the labelled volume stays; the next model of that name resumes it.
    await env.core.deleteNamespacedConfigMap({ name: rootName('kept'), namespace: env.ns });
    await waitFor('the root gone', 10_000, async () => !(await readRoot('kept').catch(() => undefined)));
    const next = await activity(env.acts.claimName, { model });
    expect(next.rootUid).not.toBe(claim.rootUid);
    expect(next.resumed).toEqual([`PersistentVolumeClaim/${pvcName('kept')}`]);
    expect(await activity(env.acts.applyStorage, { ...input, rootUid: next.rootUid })).toMatchObject({
      holdsSource: true,
    });
  });
});

describe('claiming a name', () => {
  it('refuses objects of someone else, names them and their owner, and leaves them untouched', async () => {
    const model = testModel('taken', env.ns);
    const cm = await env.core.createNamespacedConfigMap({
      namespace: env.ns,
      body: {
        metadata: { name: rootName('taken'), labels: { 'app.kubernetes.io/managed-by': 'helm' } },
        data: { mine: 'yes' },
      },
    });
    const svc = await env.core.createNamespacedService({
      namespace: env.ns,
      body: { metadata: { name: 'taken' }, spec: { ports: [{ port: 80 }] } },
    });

    const err = await rejectionOf(activity(env.acts.claimName, { model }));
    expect(err).toBeInstanceOf(ApplicationFailure);
    const failure = err as unknown as ApplicationFailure;
    expect(failure.type).toBe(FAILURE.NameConflict);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(`ConfigMap ${env.ns}/${rootName('taken')} already exists (managed by helm)`);
    expect(failure.message).toMatch(new RegExp(`Service ${env.ns}/taken already exists \\(written by [^)]+\\)`));

    const cmAfter = await readRoot('taken');
    expect(cmAfter.metadata?.resourceVersion).toBe(cm.metadata?.resourceVersion);
    expect(cmAfter.data).toEqual({ mine: 'yes' });
    const svcAfter = await env.core.readNamespacedService({ name: 'taken', namespace: env.ns });
    expect(svcAfter.metadata?.resourceVersion).toBe(svc.metadata?.resourceVersion);
    // Nothing was written for the model either.
    await expect(readPvc('taken')).rejects.toMatchObject({ code: 404 });
  });

  it("refuses another Ferry model's object with the same name", async () => {
    const other = testModel('neighbour', env.ns);
    const claim = await activity(env.acts.claimName, { model: other });
    await activity(env.acts.applyStorage, { model: other, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    // A model whose volume name would be the neighbour's (names are derived, so copy the PVC under the new name).
    const pvc = await readPvc('neighbour');
    const copy: V1PersistentVolumeClaim = {
      metadata: { name: pvcName('copycat'), labels: pvc.metadata?.labels },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    };
    await env.core.createNamespacedPersistentVolumeClaim({ namespace: env.ns, body: copy });
    const err = (await rejectionOf(activity(env.acts.claimName, { model: testModel('copycat', env.ns) }))) as unknown;
    expect((err as ApplicationFailure).type).toBe(FAILURE.NameConflict);
    expect((err as ApplicationFailure).message).toContain("(Ferry's object for model neighbour)");
  });

  it('refuses to resume over a root ConfigMap that is not ours even when the rest is', async () => {
    const body: V1ConfigMap = { metadata: { name: rootName('half'), labels: { team: 'x' } } };
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body });
    const err = (await rejectionOf(activity(env.acts.claimName, { model: testModel('half', env.ns) }))) as unknown;
    expect((err as ApplicationFailure).type).toBe(FAILURE.NameConflict);
    expect((err as ApplicationFailure).message).toContain(`ConfigMap ${env.ns}/${rootName('half')}`);
  });
});
