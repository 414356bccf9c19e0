// A shared cache of weights on the real engine (docs/design/cache.md): two models of examples/tiny.yaml's source with
// `storage.cache: shared`, served at once, are pulled by one real puller Job into one volume (the local Hub's front
// counts the repository's bytes once), run by two real vLLM processes that both mount it (on one node: the volume is
// ReadWriteOnce), and both answer. The last one deleted deletes the volume.
import { Watch, type V1Job } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { cacheClaimName, cacheJobName, cacheKey } from '../../activities/builders/index.js';
import { type ModelStatus, parseServedModel } from '../../workflows/contract/index.js';
import { expectOk, ferryJson, uniqueCluster } from '../support/e2e.js';
import { runFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { waitFor } from '../support/kube.js';
import { completionTokens, hubBytes, realEngineMissing, repoBytes, tinyDoc } from './support.js';

// Two real vLLM processes at once, a few minutes: run by its own command, `npm run test:real-engine:cache` (a stack
// started with `npm run local:up -- --engine vllm`), not in CI, where test/integration/e2e/cache.test.ts shows the
// same path with KWOK's pods.
const missing =
  realEngineMissing() ??
  (process.env.FERRY_REAL_ENGINE_CACHE ? undefined : 'runs by its own command: npm run test:real-engine:cache');
const kube = useNamespace('real-cache', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('real-cache');
const REPO = 'ferry-local/tiny-llama';
const NAMES = ['tiny-a', 'tiny-b'];

const doc = (name: string) =>
  tinyDoc(kube.ns, cluster, (d) => {
    d.metadata.name = name;
    d.spec.storage = { cache: 'shared', accessMode: 'ReadWriteOnce' };
  });
const status = (name: string) => ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);

describe.skipIf(missing)(`a shared cache on the real engine${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    await startWorkerProcess(cluster);
  }, 180_000);

  it('two models of one source: one pull, counted once by the Hub, two real engines on the one volume, both answer', async () => {
    const key = cacheKey(parseServedModel(doc('any')).spec.source);
    const created: string[] = [];
    const watch = await new Watch(kube.kc).watch(
      `/apis/batch/v1/namespaces/${kube.ns}/jobs`,
      {},
      (type: string, job: V1Job) => void (type === 'ADDED' && created.push(job.metadata!.name!)),
      () => undefined,
    );
    const before = await hubBytes(REPO);
    const served = await Promise.all(
      NAMES.map((name) => runFerry(['serve', '-f', writeDoc(doc(name)), '--wait', '--timeout', '9m'])),
    );
    served.forEach((run, i) => expectOk(run, `ferry serve ${NAMES[i]}`));
    watch.abort();

    expect(created).toEqual([cacheJobName(key)]);
    const bytes = (await hubBytes(REPO)) - before;
    console.log(`two models, one cache: the Hub served ${bytes} bytes for a ${repoBytes(REPO, 'v1')}-byte model`);
    expect(bytes).toBe(repoBytes(REPO, 'v1'));

    const nodes = new Set<string>();
    for (const name of NAMES) {
      const s = await status(name);
      expect(s.phase).toBe('Ready');
      expect(await completionTokens(s.endpoint!, name)).toBeGreaterThan(0);
      const pods = await kube.core.listNamespacedPod({
        namespace: kube.ns,
        labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
      });
      for (const pod of pods.items) {
        nodes.add(pod.spec!.nodeName!);
        const claim = pod.spec?.volumes?.find((v) => v.name === 'weights')?.persistentVolumeClaim?.claimName;
        expect(claim).toBe(cacheClaimName(key));
      }
    }
    // ReadWriteOnce: every pod of the cache on one node.
    expect(nodes.size).toBe(1);

    for (const name of NAMES) {
      expectOk(await runFerry(['delete', name, '-n', kube.ns, '--cluster', cluster, '--wait']), `delete ${name}`);
    }
    await waitFor('the cache volume gone', 120_000, async () => {
      const pvcs = await kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.ns });
      return pvcs.items.length === 0 ? true : undefined;
    });
  });
});
