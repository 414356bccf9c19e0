import { beforeAll, describe, expect, it } from 'vitest';
import { Watch, type V1Job } from '@kubernetes/client-node';
import { cacheClaimName, cacheJobName, cacheKey, cacheUsers } from '../../../activities/builders/index.js';
import { type ModelStatus, parseServedModel } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, modelObjects, simulatedModelDoc, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// `spec.storage.cache: shared` (docs/design/cache.md) through the CLI, a real worker process and the real control
// plane: two models of one source served at once share one volume and one puller Job, and the last one deleted
// deletes the volume. The pods are KWOK's: the download is simulated, and nothing is mounted.
const kube = useNamespace('e2e-cache', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('cache');

beforeAll(async () => {
  await startWorkerProcess(cluster);
}, 180_000);

// The simulated download takes 5 s: long enough for the second model to find the first one's Job running.
const modelDoc = (name: string, patch: (d: Doc) => void = () => undefined): Doc =>
  simulatedModelDoc(kube.ns, cluster, name, '5s', (d) => {
    d.spec.storage = { cache: 'shared' };
    patch(d);
  });

const ref = (name: string) => [name, '-n', kube.ns, '--cluster', cluster];
const status = (name: string) => ferryJson<ModelStatus>(['status', ...ref(name)]);
const key = cacheKey(parseServedModel(modelDoc('any')).spec.source);
const readCache = () =>
  kube.core
    .readNamespacedPersistentVolumeClaim({ name: cacheClaimName(key), namespace: kube.ns })
    .catch(() => undefined);

describe('a shared cache of weights, end to end', { timeout: 360_000 }, () => {
  it('two models of one source download once into one volume; the last one deleted deletes it', async () => {
    const [one, two] = ['one', 'two'].map((name) => writeDoc(modelDoc(name)));
    // Every Job created in the namespace, as it is created (a released Job is deleted after its pull).
    const created: string[] = [];
    const watch = await new Watch(kube.kc).watch(
      `/apis/batch/v1/namespaces/${kube.ns}/jobs`,
      {},
      (type: string, job: V1Job) => void (type === 'ADDED' && created.push(job.metadata!.name!)),
      () => undefined,
    );
    const served = await Promise.all(
      [one!, two!].map((file) => runFerry(['serve', '-f', file, '--wait', '--timeout', '4m'])),
    );
    served.forEach((run, i) => expectOk(run, `ferry serve ${['one', 'two'][i]}`));
    for (const name of ['one', 'two']) expect((await status(name)).phase).toBe('Ready');

    // One Job and one volume, the cache's; neither model has its own. The Job is released once the pull is recorded.
    watch.abort();
    expect(created).toEqual([cacheJobName(key)]);
    await waitFor('the released Job gone', 30_000, async () => {
      const jobs = await kube.batch.listNamespacedJob({ namespace: kube.ns });
      return jobs.items.length === 0 ? true : undefined;
    });
    const pvcs = await kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.ns });
    expect(pvcs.items.map((p) => p.metadata?.name)).toEqual([cacheClaimName(key)]);
    const cache = await readCache();
    expect(cacheUsers(cache)).toEqual(['one', 'two']);
    expect(cache?.metadata?.annotations?.['ferry.dev/weights-source']).toContain('Qwen/Qwen2.5-0.5B-Instruct');
    for (const name of ['one', 'two']) {
      const deployment = await kube.apps.readNamespacedDeployment({ name, namespace: kube.ns });
      const volume = deployment.spec?.template.spec?.volumes?.find((v) => v.name === 'weights');
      expect(volume?.persistentVolumeClaim?.claimName).toBe(cacheClaimName(key));
      expect(deployment.spec?.template.metadata?.labels?.['ferry.dev/cache']).toBe(key);
    }

    // A third model of the source, served after the pull, finds the weights there and downloads nothing.
    expectOk(
      await runFerry(['serve', '-f', writeDoc(modelDoc('three')), '--wait', '--timeout', '4m']),
      'ferry serve three',
    );
    const three = await status('three');
    expect(three.timeline.filter((t) => t.step === 'download').map((t) => t.outcome)).toEqual(['Skipped']);

    // Its source cannot change while it runs on the cache.
    const moved = modelDoc('three', (d) => (d.spec.source = { huggingface: { repo: 'Qwen/Qwen2.5-1.5B-Instruct' } }));
    const refused = await runFerry(['apply', '-f', writeDoc(moved)]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr + refused.stdout).toContain('spec.source');

    // Deleting all but one leaves the volume to the last; the last deletes it, and its Job with it.
    for (const name of ['one', 'three']) expectOk(await runFerry(['delete', ...ref(name), '--wait']), `delete ${name}`);
    expect(cacheUsers(await readCache())).toEqual(['two']);
    expectOk(await runFerry(['delete', ...ref('two'), '--wait']), 'delete two');
    await waitFor('the cache volume and its Job gone', 90_000, async () => {
      const [pvc, jobs, pods] = await Promise.all([
        readCache(),
        kube.batch.listNamespacedJob({ namespace: kube.ns }),
        kube.core.listNamespacedPod({ namespace: kube.ns }),
      ]);
      if (!pvc && jobs.items.length === 0) return true;
      throw new Error(
        `left: ${JSON.stringify({
          pvc: pvc && { deleting: pvc.metadata?.deletionTimestamp, finalizers: pvc.metadata?.finalizers },
          jobs: jobs.items.map((j) => j.metadata?.name),
          pods: pods.items.map(
            (p) => `${p.metadata?.name} ${p.status?.phase}${p.metadata?.deletionTimestamp ? ' deleting' : ''}`,
          ),
        })}`,
      );
    });
    for (const name of ['one', 'two', 'three']) expect(await modelObjects(kube, kube.ns, name)).toEqual([]);
  });

  it('refuses what a shared cache is not yet built for, with nothing created', async () => {
    const adapters = modelDoc('with-adapters', (d) => {
      d.spec.engine = {
        ...d.spec.engine,
        lora: {
          enabled: true,
          adapters: [{ name: 'sql', source: { huggingface: { repo: 'ferry-local/tiny-lora-sql' } } }],
        },
      };
    });
    const run = await runFerry(['serve', '-f', writeDoc(adapters)]);
    expect(run.code).not.toBe(0);
    expect(run.stderr + run.stdout).toContain('spec.engine.lora.adapters');
    expect(await modelObjects(kube, kube.ns, 'with-adapters')).toEqual([]);
  });
});
