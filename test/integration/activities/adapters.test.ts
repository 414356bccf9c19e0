import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adapterDir, buildAdapterJob } from '../../../activities/builders/index.js';
import { adapterFetches } from '../../../activities/readers/adapter-job.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { EngineSimSupervisor } from '../../../deploy/engine-sim/supervisor.js';
import type { AdapterSyncResult, ServedModel } from '../../../workflows/contract/index.js';
import { activity, testModel } from '../../support/activity-env.js';
import { adaptersListed, chatCompletion, enginePodsOf, prepareModel } from '../../support/engine-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// Loading LoRA adapters replica by replica. The Deployment, its ReplicaSet and its (KWOK) pods are real; each pod's
// engine is a stand-in started by the supervisor from that pod's own args, reached at its per-pod endpoint, and it
// keeps adapters in memory as vLLM does. `volume` stands for the model's volume at /models: the stand-ins refuse a
// path without an adapter's files there, as vLLM does.
const volume = mkdtempSync(join(tmpdir(), 'ferry-adapters-volume-'));
const file = join(mkdtempSync(join(tmpdir(), 'ferry-adapters-')), 'endpoints.json');
const overrides = () => JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
const env = useActivityEnv('act-lora', { deps: () => ({ endpoints: overrideEndpoints(overrides) }) });
let supervisor: EngineSimSupervisor;
beforeAll(() => {
  writeFileSync(file, '{}');
  supervisor = new EngineSimSupervisor(env.core, file, { modelsDir: volume, namespace: env.ns });
});
afterAll(async () => {
  await supervisor.stop();
});

const hf = (repo: string) => ({ huggingface: { repo, revision: 'main' } });
/** Puts an adapter's files where the adapter Job would (the stand-in reads only adapter_config.json). */
function onVolume(source: ReturnType<typeof hf>, rank = 8) {
  const dir = join(volume, adapterDir(source).slice('/models'.length));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify({ r: rank }));
}

const withAdapters = (name: string, adapters: { name: string; source: ReturnType<typeof hf> }[], replicas = 2) =>
  testModel(name, env.ns, {
    labels: { 'sim.ferry.dev/load-delay-seconds': '0' },
    spec: { replicas, resources: { gpus: 0 }, engine: { lora: { enabled: true, adapters } } },
  });

/** Rolls the model's engine out and waits until every ready pod has a healthy stand-in at its own endpoint. */
async function rolledOut(model: ServedModel): Promise<string[]> {
  const rootUid = await prepareModel(model, env.cluster);
  const { generation } = await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });
  await activity(env.acts.awaitRollout, { model, generation });
  return standIns(model);
}

async function standIns(model: ServedModel): Promise<string[]> {
  return waitFor('a healthy stand-in per ready pod', 30_000, async () => {
    await supervisor.sync();
    const pods = (await enginePodsOf(env, model)).filter(
      (p) =>
        !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    if (pods.length !== model.spec.replicas) return undefined;
    const urls = pods.map((p) => overrides()[`${env.ns}/${model.metadata.name}/${p.metadata!.name}`]);
    if (urls.some((u) => !u)) return undefined;
    const healthy = await Promise.all(urls.map((u) => fetch(`${u}/health`).then((r) => r.status === 200)));
    return healthy.every(Boolean) ? (urls as string[]) : undefined;
  });
}

const byName = (result: AdapterSyncResult) => Object.fromEntries(result.adapters.map((a) => [a.name, a]));

describe('syncAdapters', () => {
  it('loads every adapter on every replica; a change unloads and loads in place; a replaced pod gets them back', async () => {
    const sql = hf('org/sql-lora');
    const chat = hf('org/chat-lora');
    const code = hf('org/code-lora');
    [sql, chat, code].forEach(onVolume);
    const model = withAdapters('duo', [
      { name: 'sql', source: sql },
      { name: 'chat', source: chat },
    ]);
    const urls = await rolledOut(model);

    const first = await activity(env.acts.syncAdapters, { model });
    expect(first.adapters).toEqual([
      { name: 'sql', loadedReplicas: 2, readyReplicas: 2 },
      { name: 'chat', loadedReplicas: 2, readyReplicas: 2 },
    ]);
    expect(first.incarnations).toHaveLength(2);
    for (const url of urls) {
      expect(await adaptersListed(url)).toEqual(['chat', 'sql']);
      const answer = await chatCompletion(url, 'sql');
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { model: string }).model).toBe('sql');
    }
    // Nothing to do the second time: no request changes a replica.
    expect(await activity(env.acts.syncAdapters, { model })).toEqual(first);

    // chat out, code in: unloaded and loaded on both replicas, the Deployment untouched.
    const changed = withAdapters('duo', [
      { name: 'sql', source: sql },
      { name: 'code', source: code },
    ]);
    const deployment = await env.apps.readNamespacedDeployment({ name: 'duo', namespace: env.ns });
    const second = await activity(env.acts.syncAdapters, { model: changed });
    expect(second.unloaded).toHaveLength(2);
    for (const line of second.unloaded) expect(line).toMatch(/^chat from duo-/);
    expect(byName(second)).toEqual({
      sql: { name: 'sql', loadedReplicas: 2, readyReplicas: 2 },
      code: { name: 'code', loadedReplicas: 2, readyReplicas: 2 },
    });
    for (const url of urls) expect(await adaptersListed(url)).toEqual(['code', 'sql']);
    const after = await env.apps.readNamespacedDeployment({ name: 'duo', namespace: env.ns });
    expect(after.metadata?.generation).toBe(deployment.metadata?.generation);

    // A pod deleted: its replacement's engine holds nothing until the next sync, which sees a new incarnation.
    const [victim] = await enginePodsOf(env, changed);
    await env.core.deleteNamespacedPod({ name: victim!.metadata!.name!, namespace: env.ns, gracePeriodSeconds: 0 });
    const replaced = await waitFor('a replacement pod with its stand-in', 60_000, async () => {
      const now = await standIns(changed).catch(() => undefined);
      const pods = await enginePodsOf(env, changed);
      return now && !pods.some((p) => p.metadata?.uid === victim!.metadata!.uid) ? now : undefined;
    });
    const bare = await Promise.all(replaced.map(adaptersListed));
    expect(bare.filter((l) => l.length === 0)).toHaveLength(1);
    const third = await activity(env.acts.syncAdapters, { model: changed });
    expect(third.incarnations).not.toEqual(second.incarnations);
    expect(byName(third).code).toEqual({ name: 'code', loadedReplicas: 2, readyReplicas: 2 });
    for (const url of replaced) expect(await adaptersListed(url)).toEqual(['code', 'sql']);
  });

  it("an adapter whose files are not on the volume is refused for good, with the engine's words; the others load", async () => {
    const there = hf('org/there-lora');
    onVolume(there);
    const model = withAdapters(
      'gap',
      [
        { name: 'there', source: there },
        { name: 'absent', source: hf('org/absent-lora') },
      ],
      1,
    );
    const [url] = await rolledOut(model);
    const result = await activity(env.acts.syncAdapters, { model });
    expect(byName(result).there).toEqual({ name: 'there', loadedReplicas: 1, readyReplicas: 1 });
    expect(byName(result).absent).toMatchObject({
      loadedReplicas: 0,
      readyReplicas: 1,
      error: {
        reason: 'AdapterRefused',
        permanent: true,
        message: expect.stringContaining(`No adapter found for ${adapterDir(hf('org/absent-lora'))}`),
      },
    });
    expect(await adaptersListed(url!)).toEqual(['there']);
  });

  it("an adapter the engine's worker cannot load (a rank above --max-lora-rank: vLLM's 500) is refused for good", async () => {
    const wide = hf('org/wide-lora');
    onVolume(wide, 64);
    const model = withAdapters('broad', [{ name: 'wide', source: wide }], 1);
    await rolledOut(model);
    const result = await activity(env.acts.syncAdapters, { model });
    expect(byName(result).wide).toMatchObject({
      loadedReplicas: 0,
      error: {
        reason: 'AdapterRefused',
        permanent: true,
        message: expect.stringContaining('LoRA rank 64 is greater than max_lora_rank 16'),
      },
    });
  });

  it('a replica whose engine cannot be reached is reported, to be tried again', async () => {
    const model = withAdapters('dark', [{ name: 'sql', source: hf('org/sql-lora') }], 1);
    await rolledOut(model);
    const dark = { ...env.deps, endpoints: overrideEndpoints({}) };
    const { syncAdapters } = await import('../../../activities/steps/adapters.js');
    const result = await activity((input: { model: ServedModel }) => syncAdapters(dark, input), { model });
    expect(result.adapters).toEqual([
      {
        name: 'sql',
        loadedReplicas: 0,
        readyReplicas: 1,
        error: {
          reason: 'EngineUnreachable',
          permanent: false,
          message: expect.stringContaining('no endpoint override names pod'),
        },
      },
    ]);
  });

  it('the adapter Job is accepted by the API server and its pod runs on the node of the engine (ReadWriteOnce)', async () => {
    const model = withAdapters('jobbed', [{ name: 'sql', source: hf('org/sql-lora') }], 1);
    const rootUid = await prepareModel(model, env.cluster);
    await rolledOut(model);
    const [engine] = await enginePodsOf(env, model);
    const job = buildAdapterJob(model, { rootUid });
    await env.batch.createNamespacedJob({ namespace: env.ns, body: job });
    const pod = await waitFor('the adapter pod to finish', 30_000, async () => {
      const pods = await env.core.listNamespacedPod({
        namespace: env.ns,
        labelSelector: `batch.kubernetes.io/job-name=${job.metadata!.name}`,
      });
      return pods.items.find((p) => p.status?.phase === 'Succeeded');
    });
    // Without its pod affinity the scheduler would rather pick the other simulated node: the engine's requests
    // (2 CPUs, 12 GiB) make the engine's node the more allocated one.
    expect(pod.spec?.nodeName).toBe(engine!.spec?.nodeName);
    expect(adapterFetches(pod, model.spec.engine.lora.adapters!)).toEqual([{ name: 'sql', state: 'Fetched' }]);
  });

  it('fetchAdapters runs one Job for what the volume lacks, records what it holds, and skips the Job next time', async () => {
    const model = withAdapters(
      'fetcher',
      [
        { name: 'sql', source: hf('org/sql-lora') },
        { name: 'chat', source: hf('org/chat-lora') },
      ],
      1,
    );
    const rootUid = await prepareModel(model, env.cluster);
    await rolledOut(model);
    const first = await activity(env.acts.fetchAdapters, { model, rootUid, sourceHash: 'x' });
    expect(first).toEqual({
      jobName: expect.stringMatching(/^fetcher-adapters-/),
      fetched: ['sql', 'chat'],
      failed: [],
    });
    const held = async () =>
      (await env.core.readNamespacedPersistentVolumeClaim({ name: 'fetcher-weights', namespace: env.ns })).metadata
        ?.annotations?.['ferry.dev/adapters'];
    const [sql, chat] = model.spec.engine.lora.adapters!.map((a) => adapterDir(a.source).split('/').pop());
    expect(await held()).toBe(`${sql} ${chat}`);
    await waitFor('the adapter Job to be gone', 30_000, async () => {
      const jobs = await env.batch.listNamespacedJob({ namespace: env.ns, labelSelector: 'ferry.dev/model=fetcher' });
      return jobs.items.length === 0;
    });

    // Nothing missing: no Job at all.
    expect(await activity(env.acts.fetchAdapters, { model, rootUid, sourceHash: 'x' })).toEqual({
      fetched: ['sql', 'chat'],
      failed: [],
    });
    // One removed: a Job prunes it, and the record follows.
    const fewer = withAdapters('fetcher', [{ name: 'sql', source: hf('org/sql-lora') }], 1);
    const pruned = await activity(env.acts.fetchAdapters, { model: fewer, rootUid, sourceHash: 'x' });
    expect(pruned).toMatchObject({ jobName: expect.stringMatching(/^fetcher-adapters-/), fetched: ['sql'] });
    expect(await held()).toBe(sql);
  });

  it('an adapter Job that runs out of its deadline fails its adapters, to be tried again, and records nothing', async () => {
    const model = testModel('slowpoke', env.ns, {
      // The simulated Job pod would finish after 10 minutes; its Job gives up after 3 s.
      labels: { 'sim.ferry.dev/load-delay-seconds': '0', 'sim.ferry.dev/complete-delay': '600s' },
      spec: {
        replicas: 1,
        resources: { gpus: 0 },
        puller: { deadline: '3s' },
        engine: { lora: { enabled: true, adapters: [{ name: 'sql', source: hf('org/sql-lora') }] } },
      },
    });
    const rootUid = await prepareModel(model, env.cluster);
    await rolledOut(model);
    const result = await activity(env.acts.fetchAdapters, { model, rootUid, sourceHash: 'x' });
    expect(result.fetched).toEqual([]);
    expect(result.failed).toEqual([
      { name: 'sql', reason: expect.stringMatching(/DeadlineExceeded/), message: expect.any(String), permanent: false },
    ]);
    const pvc = await env.core.readNamespacedPersistentVolumeClaim({ name: 'slowpoke-weights', namespace: env.ns });
    expect(pvc.metadata?.annotations?.['ferry.dev/adapters']).toBe('');
  });

  it('an adapter copied from a claim that does not exist is refused by name; the others are fetched', async () => {
    const model = withAdapters(
      'claims',
      [
        { name: 'sql', source: hf('org/sql-lora') },
        { name: 'ckpt', source: { pvc: { claimName: 'no-such-claim', path: 'lora' } } as never },
      ],
      1,
    );
    const rootUid = await prepareModel(model, env.cluster);
    await rolledOut(model);
    const result = await activity(env.acts.fetchAdapters, { model, rootUid, sourceHash: 'x' });
    expect(result.fetched).toEqual(['sql']);
    expect(result.failed).toEqual([
      {
        name: 'ckpt',
        reason: 'SourceNotFound',
        message: `the PersistentVolumeClaim no-such-claim does not exist in namespace ${env.ns}`,
        permanent: true,
      },
    ]);
    // The record holds what was fetched: the next call runs no Job and says the same.
    expect(await activity(env.acts.fetchAdapters, { model, rootUid, sourceHash: 'x' })).toEqual({
      fetched: ['sql'],
      failed: result.failed,
    });
  });
});
