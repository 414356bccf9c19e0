// LoRA adapters end to end: a real worker process, the CLI, the local control plane, and an engine stand-in per
// engine pod (the supervisor's), each keeping its adapters in memory as vLLM does. The adapter Job's pod is a KWOK
// pod that runs nothing: the files are simulated, the loading is real HTTP to each replica.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { adaptersListed, chatCompletion } from '../../support/engine-env.js';
import { repoRoot } from '../../support/local-env.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const kube = useNamespace('e2e-lora', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('lora');
let started: Awaited<ReturnType<typeof startWorkerProcess>> | undefined;
const worker = () => started!;

beforeAll(async () => {
  started = await startWorkerProcess(cluster);
}, 180_000);

const NAME = 'lora';
const status = () => ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);
const doc = (adapters: string[]): Doc => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: {
    name: NAME,
    namespace: kube.ns,
    labels: { 'sim.ferry.dev/load-delay-seconds': '0', 'sim.ferry.dev/complete-delay': '1s' },
  },
  spec: {
    cluster,
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    replicas: 2,
    resources: { gpus: 0 },
    engine: {
      startupTimeout: '3m',
      lora: {
        enabled: true,
        adapters: adapters.map((name) => ({ name, source: { huggingface: { repo: `org/${name}-lora` } } })),
      },
    },
    puller: { deadline: '5m' },
  },
});

/** Each ready engine pod's stand-in URL, as the supervisor publishes it. */
async function replicas(): Promise<Map<string, string>> {
  const pods = await kube.core.listNamespacedPod({
    namespace: kube.ns,
    labelSelector: `ferry.dev/model=${NAME},app.kubernetes.io/component=engine`,
  });
  const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;
  const ready = pods.items.filter(
    (p) =>
      !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  return new Map(ready.map((p) => [p.metadata!.name!, urls[`${kube.ns}/${NAME}/${p.metadata!.name}`] ?? '']));
}

async function everyReplicaHolds(adapters: string[]): Promise<Map<string, string>> {
  return waitFor(`every replica to hold ${adapters.join(', ')}`, 30_000, async () => {
    const urls = await replicas();
    if (urls.size !== 2 || [...urls.values()].some((u) => !u)) return undefined;
    const held = await Promise.all([...urls.values()].map((u) => adaptersListed(u).catch(() => [])));
    return held.every((h) => JSON.stringify(h) === JSON.stringify([...adapters].sort())) ? urls : undefined;
  });
}

describe('LoRA adapters, end to end', { timeout: 300_000 }, () => {
  it('loads on each replica, changes in place, and comes back on a replacement pod', async () => {
    expectOk(await runFerry(['serve', '-f', writeDoc(doc(['sql', 'chat'])), '--wait', '--timeout', '4m']), 'serve');
    const served = await status();
    expect(served.phase).toBe('Ready');
    expect(served.adapters).toEqual([
      { name: 'sql', state: 'Loaded', loadedReplicas: 2, readyReplicas: 2 },
      { name: 'chat', state: 'Loaded', loadedReplicas: 2, readyReplicas: 2 },
    ]);
    const urls = await everyReplicaHolds(['sql', 'chat']);
    for (const url of urls.values()) {
      const answer = await chatCompletion(url, 'sql');
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { model: string }).model).toBe('sql');
    }
    const text = await runFerry(['status', NAME, '-n', kube.ns, '--cluster', cluster]);
    expect(text.stdout).toMatch(/adapters:\n\s+NAME\s+STATE\s+REPLICAS.*\n\s+sql\s+Loaded\s+2\/2/);

    // A third adapter: in place (the Deployment's generation stays, no puller of the base weights runs).
    const deployment = await kube.apps.readNamespacedDeployment({ name: NAME, namespace: kube.ns });
    expectOk(
      await runFerry(['apply', '-f', writeDoc(doc(['sql', 'chat', 'code'])), '--wait', '--timeout', '2m']),
      'apply',
    );
    await everyReplicaHolds(['sql', 'chat', 'code']);
    const after = await kube.apps.readNamespacedDeployment({ name: NAME, namespace: kube.ns });
    expect(after.metadata?.generation).toBe(deployment.metadata?.generation);
    const added = await status();
    expect(added.timeline.filter((e) => e.step === 'download')).toHaveLength(1);
    // In place, asked by the CLI's process (its Temporal identity, pid@host).
    expect(
      added.timeline.some((e) => e.step === 'update' && /^generation 2: in place, asked by \d+@\S+$/.test(e.detail!)),
    ).toBe(true);

    // One removed: unloaded on every replica.
    expectOk(await runFerry(['apply', '-f', writeDoc(doc(['sql', 'code'])), '--wait', '--timeout', '2m']), 'apply');
    await everyReplicaHolds(['sql', 'code']);

    // A replica's pod deleted: its replacement's engine starts empty and gets the adapters without anyone asking.
    const [victim] = [...(await replicas()).keys()];
    await kube.core.deleteNamespacedPod({ name: victim!, namespace: kube.ns });
    const healed = await everyReplicaHolds(['sql', 'code']);
    expect(healed.has(victim!)).toBe(false);
    const back = await waitFor('Ready with the adapters on both replicas', 30_000, async () => {
      const s = await status();
      return s.phase === 'Ready' && s.adapters?.every((a) => a.loadedReplicas === 2) ? s : undefined;
    });
    // It was Degraded meanwhile (a replica short, then its engine without the adapters), and is Ready again.
    expect(back.timeline.at(-1)).toMatchObject({ step: 'degraded', outcome: 'Succeeded' });
  });

  it('an adapter whose source does not exist: Failed with a message to act on, the base serving, the wait ends', async () => {
    const bad = doc(['sql']);
    bad.metadata.name = 'lora-bad';
    bad.spec.replicas = 1;
    bad.spec.engine.lora.adapters.push({ name: 'ckpt', source: { pvc: { claimName: 'no-such-claim' } } });
    const run = await runFerry(['serve', '-f', writeDoc(bad), '--wait', '--timeout', '4m']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('the PersistentVolumeClaim no-such-claim does not exist');
    const s = await ferryJson<ModelStatus>(['status', 'lora-bad', '-n', kube.ns, '--cluster', cluster]);
    expect(s.phase).toBe('Degraded');
    expect(s.lastError?.reason).toBe('AdapterFailed');
    expect(s.adapters).toEqual([
      { name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 },
      expect.objectContaining({ name: 'ckpt', state: 'Failed', reason: 'SourceNotFound', loadedReplicas: 0 }),
    ]);
    // The base model still answers.
    const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<
      string,
      string
    >;
    expect((await fetch(`${urls[`${kube.ns}/lora-bad`]}/health`)).status).toBe(200);
  });

  it('a keyed model gets its adapters: the worker reads the key from its Secret, and no log line holds it', async () => {
    const key = 'lora-key-7f3a9c';
    await kube.core.createNamespacedSecret({
      namespace: kube.ns,
      body: { metadata: { name: 'lora-keyed-key' }, stringData: { token: key } },
    });
    const keyed = doc(['sql']);
    keyed.metadata.name = 'lora-keyed';
    keyed.spec.replicas = 1;
    keyed.spec.engine.apiKeySecret = { name: 'lora-keyed-key' };
    expectOk(await runFerry(['serve', '-f', writeDoc(keyed), '--wait', '--timeout', '4m']), 'serve');
    const s = await ferryJson<ModelStatus>(['status', 'lora-keyed', '-n', kube.ns, '--cluster', cluster]);
    expect(s).toMatchObject({ phase: 'Ready' });
    expect(s.adapters).toEqual([{ name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 }]);
    // The engine holds it, behind its key: without the key it answers 401.
    const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<
      string,
      string
    >;
    const url = urls[`${kube.ns}/lora-keyed`]!;
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    const listed = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(((await listed.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toContain('sql');
    expect(JSON.stringify(s)).not.toContain(key);
    expect(worker().log()).not.toContain(key);
  });
});
