// Joining and leaving a cache of weights (docs/design/cache.md, section 3) against the real API server: concurrent
// joins all recorded, the last user out deleting the volume (or keeping it when it retains), a model that joins while
// another leaves keeping it, and a PVC of the cache's name that is not a cache refused.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { cacheClaimName, cacheJobName, cacheKey, cacheUsers, LABEL_CACHE } from '../../../activities/builders/index.js';
import { joinCache, leaveCache } from '../../../activities/cluster/cache.js';
import type { ServedModel } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, testModel } from '../../support/activity-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const env = useActivityEnv('act-cache');

/** A model of a source of its own (`repo`), so that each test has its own cache. */
const of = (name: string, repo: string, retainOnDelete = false): ServedModel =>
  testModel(name, env.ns, {
    spec: { source: { huggingface: { repo: `ferry-local/${repo}` } }, storage: { retainOnDelete } },
  });

const read = (model: ServedModel) =>
  env.cluster.get<V1PersistentVolumeClaim>({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    name: cacheClaimName(cacheKey(model.spec.source)),
    namespace: env.ns,
  });

describe('a cache of weights on the cluster', () => {
  it('records every model of five that join at once, each once, on one volume', async () => {
    const models = ['m1', 'm2', 'm3', 'm4', 'm5'].map((n) => of(n, 'five'));
    const joined = await Promise.all(models.map((m) => joinCache(env.cluster, m, m.metadata.name)));
    expect(new Set(joined.map((pvc) => pvc.metadata?.uid)).size).toBe(1);
    // Joining again changes nothing.
    await joinCache(env.cluster, models[0]!, 'm1');
    const pvc = await read(models[0]!);
    expect(cacheUsers(pvc)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']);
    expect(pvc?.metadata?.labels?.[LABEL_CACHE]).toBe(cacheKey(models[0]!.spec.source));
    expect(pvc?.metadata?.ownerReferences).toBeUndefined();
  });

  it('is deleted by the last model out, not before; with retainOnDelete the last keeps it for the next', async () => {
    const [a, b] = [of('a', 'shared'), of('b', 'shared')];
    await joinCache(env.cluster, a, 'a');
    await joinCache(env.cluster, b, 'b');
    expect(await leaveCache(env.cluster, a, 'a', false)).toBe('left');
    expect(cacheUsers(await read(a))).toEqual(['b']);
    expect(await leaveCache(env.cluster, b, 'b', false)).toBe('deleted');
    const gone = await read(a);
    expect(gone === undefined || Boolean(gone.metadata?.deletionTimestamp)).toBe(true);
    // Leaving again (a retried teardown) is nothing.
    expect(await leaveCache(env.cluster, b, 'b', false)).toMatch(/^(absent|deleted)$/);

    const [c, d] = [of('c', 'kept', true), of('d', 'kept', false)];
    await joinCache(env.cluster, c, 'c');
    await joinCache(env.cluster, d, 'd');
    // A model that does not retain, leaving before the last, deletes nothing; the last, retaining, keeps the volume.
    expect(await leaveCache(env.cluster, d, 'd', false)).toBe('left');
    expect(await leaveCache(env.cluster, c, 'c', true)).toBe('retained');
    const kept = await read(c);
    expect(kept?.metadata?.deletionTimestamp).toBeUndefined();
    expect(cacheUsers(kept)).toEqual([]);
    // The next model of that source finds the same volume.
    const next = await joinCache(env.cluster, of('e', 'kept'), 'e');
    expect(next.metadata?.uid).toBe(kept?.metadata?.uid);
    expect(cacheUsers(next)).toEqual(['e']);
  });

  it('is kept when a model joins while the last user leaves, whichever comes first', async () => {
    for (let round = 0; round < 5; round++) {
      const [leaving, joining] = [of('leaving', `race-${round}`), of('joining', `race-${round}`)];
      await joinCache(env.cluster, leaving, 'leaving');
      const [left] = await Promise.all([
        leaveCache(env.cluster, leaving, 'leaving', false),
        // Joining a volume being deleted is retried by the activity; here, until the volume is back.
        (async () => {
          for (;;) {
            try {
              return await joinCache(env.cluster, joining, 'joining');
            } catch (err) {
              if ((err as { type?: string }).type !== 'VolumeBeingDeleted') throw err;
              await new Promise((r) => setTimeout(r, 100));
            }
          }
        })(),
      ]);
      const pvc = await read(joining);
      // Either the join came first (the leaver left it) or after the delete (a new volume): never a deleted one held.
      if (left === 'left') expect(pvc?.metadata?.deletionTimestamp).toBeUndefined();
      else expect(left).toBe('deleted');
      const live = pvc && !pvc.metadata?.deletionTimestamp ? pvc : undefined;
      if (live) expect(cacheUsers(live)).toEqual(['joining']);
    }
  });

  it("releases a cache's failed pull, so the next start pulls anew, but leaves a running one to the models that await it", async () => {
    const labels = { 'sim.ferry.dev/puller-scenario': 'run-forever' };
    const spec = (deadline: string) => ({
      source: { huggingface: { repo: 'ferry-local/stalled' } },
      storage: { cache: 'shared' as const },
      puller: { deadline },
    });
    const model = testModel('stalled', env.ns, { labels, spec: spec('2s') });
    const claim = await activity(env.acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    const { jobName } = await activity(env.acts.startPuller, input);
    expect(jobName).toBe(cacheJobName(cacheKey(model.spec.source)));
    expect(await rejectionOf(activity(env.acts.awaitPuller, { model, jobName }))).toMatchObject({
      type: 'DeadlineExceeded',
    });
    const readJob = () => env.batch.readNamespacedJob({ name: jobName, namespace: env.ns }).catch(() => undefined);
    const failed = await readJob();
    // What the workflow does with a failed pull before it tries again: abandon it. The cache's Job goes.
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash, abandon: true });
    await waitFor('the failed Job gone', 30_000, async () => ((await readJob()) ? undefined : true));

    // The model, updated to a longer deadline, starts a new pull on the same cache.
    const longer = testModel('stalled', env.ns, { labels, spec: spec('1h') });
    expect(await activity(env.acts.startPuller, { ...input, model: longer })).toEqual({ jobName });
    const running = await readJob();
    expect(running?.metadata?.uid).not.toBe(failed?.metadata?.uid);
    expect(running?.spec?.activeDeadlineSeconds).toBe(3600);

    // Another model of the source joins, and abandons the pull (it is deleted, say): the Job runs on for the first.
    const other = testModel('other', env.ns, { labels, spec: spec('1h') });
    const otherClaim = await activity(env.acts.claimName, { model: other });
    await activity(env.acts.applyStorage, { model: other, rootUid: otherClaim.rootUid, sourceHash: claim.sourceHash });
    await activity(env.acts.releaseVolume, { model: other, jobName, sourceHash: claim.sourceHash, abandon: true });
    const after = await readJob();
    expect(after?.metadata?.uid).toBe(running?.metadata?.uid);
    expect(after?.metadata?.deletionTimestamp).toBeUndefined();
  });

  it("refuses a PVC of the cache's name that is not that cache's, and leaves it alone", async () => {
    const model = of('x', 'foreign');
    const name = cacheClaimName(cacheKey(model.spec.source));
    await env.core.createNamespacedPersistentVolumeClaim({
      namespace: env.ns,
      body: {
        metadata: { name },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    const err = await rejectionOf(joinCache(env.cluster, model, 'x'));
    expect(err).toMatchObject({ type: 'NameConflict' });
    await expect(leaveCache(env.cluster, model, 'x', false)).rejects.toMatchObject({ type: 'NameConflict' });
    expect((await read(model))?.metadata?.deletionTimestamp).toBeUndefined();
  });
});
