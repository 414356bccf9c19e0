// examples/tiny.yaml's whole life on the real engine: the puller is the real huggingface_hub downloading from the
// local Hub, each engine replica is a real vLLM (CPU) process in a pod of the local node agent, the admission sidecar
// is a real nginx. Ferry's worker and CLI are the same as everywhere; only the pods are run for real.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { expectOk, ferryJson, uniqueCluster } from '../support/e2e.js';
import { runFerry, spawnFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { waitFor } from '../support/kube.js';
import {
  agentContainers,
  commandLine,
  containerPids,
  HUB,
  hubBytes,
  realEngineMissing,
  repoBytes,
  tinyDoc,
  volumeDir,
} from './support.js';

const missing = realEngineMissing();
const kube = useNamespace('real-tiny', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('real');
const NAME = 'tiny';
const REPO = 'ferry-local/tiny-llama';
// The measurement's goal. One request alone gets its first token in about 0.35 s and the next every 11 ms on these CPUs
// (a quiet machine, 2026-12-03); a request that has to queue behind vLLM's 4 sequences waits for a whole answer of
// 256 tokens (about 3 s) and misses the goal. 500 ms left too little room: a busy machine pushed one request alone
// past it (a baseline of 0).
const TTFT_GOAL_MS = 1000;
const OUTPUT_TOKENS = 256;
const SLO = {
  ttft: `${TTFT_GOAL_MS}ms`,
  itl: '250ms',
  attainment: 0.9,
  workload: { promptTokens: 32, outputTokens: OUTPUT_TOKENS },
  maxConcurrency: 16,
};

const status = () => ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);

/** The document at each stage: `throttle` slows the Hub for this model's downloads so progress can be seen. */
const doc = (edit: { args?: string[]; revision?: string } = {}) =>
  tinyDoc(kube.ns, cluster, (d) => {
    d.spec.replicas = 2;
    d.spec.source.huggingface.revision = edit.revision ?? 'v1';
    d.spec.engine.args = [...d.spec.engine.args, '--max-num-seqs=4', ...(edit.args ?? [])];
    d.spec.engine.startupTimeout = '10m';
    d.spec.engine.lora = {
      enabled: true,
      maxLoras: 2,
      adapters: ['sql', 'chat'].map((name) => ({
        name,
        source: { huggingface: { repo: `ferry-local/tiny-lora-${name}`, revision: 'v1' } },
      })),
    };
    d.spec.slo = SLO;
    d.spec.storage = { retainOnDelete: true };
    d.spec.puller.env = [{ name: 'HF_ENDPOINT', value: `${HUB}/_ferry/throttle/40000` }];
  });

async function enginePods(): Promise<V1Pod[]> {
  const pods = await kube.core.listNamespacedPod({
    namespace: kube.ns,
    labelSelector: `ferry.dev/model=${NAME},app.kubernetes.io/component=engine`,
  });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
}

const ready = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
const podUrl = (p: V1Pod, port = 8000) => `http://${p.status!.podIP}:${port}`;

async function adaptersOn(pod: V1Pod): Promise<string[]> {
  const res = await fetch(`${podUrl(pod)}/v1/models`);
  const body = (await res.json()) as { data: { id: string; parent: string | null }[] };
  return body.data
    .filter((m) => m.parent)
    .map((m) => m.id)
    .sort();
}

/** Sends `n` generation requests at once to `url` (each a few seconds of decoding), and returns their statuses. */
async function burst(url: string, n: number): Promise<{ status: number; retryAfter: string | null }[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: NAME,
          prompt: 'hello world',
          max_tokens: OUTPUT_TOKENS,
          min_tokens: OUTPUT_TOKENS,
          ignore_eos: true,
        }),
      });
      await res.arrayBuffer();
      return { status: res.status, retryAfter: res.headers.get('retry-after') };
    }),
  );
}

/** `c` clients sending one streaming request each at once (the measurement's shape); their times to first token. */
async function ttftAt(url: string, c: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: c }, async () => {
      const start = performance.now();
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: NAME,
          prompt: 'hello world '.repeat(16),
          max_tokens: OUTPUT_TOKENS,
          min_tokens: OUTPUT_TOKENS,
          ignore_eos: true,
          stream: true,
        }),
      });
      let first: number | undefined;
      for await (const chunk of res.body!) {
        first ??= performance.now();
        void chunk;
      }
      return (first ?? performance.now()) - start;
    }),
  );
}

beforeAll(async () => {
  if (!missing) await startWorkerProcess(cluster);
}, 180_000);

describe.skipIf(missing)(`examples/tiny.yaml on the real engine${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let servedBefore = 0;

  it('serves: the real puller downloads through the Hub with progress, then real vLLM replicas answer', async () => {
    servedBefore = await hubBytes(REPO);
    const serve = spawnFerry(['serve', '-f', writeDoc(doc()), '--wait', '--timeout', '9m']);
    // While it downloads (the Hub paced to 40 kB/s for this model), status shows bytes already written.
    const during = await waitFor('download progress in status', 120_000, async () => {
      const s = await status().catch(() => undefined);
      return s?.phase === 'Downloading' && (s.download?.bytes ?? 0) > 0 ? s.download : undefined;
    });
    const size = repoBytes(REPO, 'v1');
    expect(during.bytes).toBeLessThan(size);
    expectOk(await serve.exited, 'ferry serve');
    const served = await status();
    expect(served.phase).toBe('Ready');
    expect(served.readyReplicas).toBe(2);
    expect(served.download).toMatchObject({ state: 'Complete', bytes: size });
    expect((await hubBytes(REPO)) - servedBefore).toBe(size);
  });

  it('answers a chat completion through the OpenAI client, at the endpoint Ferry reports', async () => {
    const { endpoint } = await status();
    const openai = new OpenAI({ baseURL: `${endpoint}/v1`, apiKey: 'unused' });
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toContain(NAME);
    const chat = await openai.chat.completions.create({
      model: NAME,
      messages: [{ role: 'user', content: 'Say something.' }],
      max_tokens: 8,
    });
    expect(chat.object).toBe('chat.completion');
    expect(typeof chat.choices[0]!.message.content).toBe('string');
    expect(chat.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('holds both adapters on each replica, and loads them again after an engine process is killed', async () => {
    await waitFor('both adapters loaded on both replicas', 300_000, async () => {
      const s = await status();
      return s.adapters?.every((a) => a.state === 'Loaded' && a.loadedReplicas === 2) && s.adapters.length === 2;
    });
    const pods = await enginePods();
    expect(pods).toHaveLength(2);
    for (const pod of pods) expect(await adaptersOn(pod)).toEqual(['chat', 'sql']);

    const victim = pods[0]!;
    const pids = containerPids(victim, 'vllm');
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await waitFor('the killed engine to be running again with both adapters', 420_000, async () => {
      const pod = (await enginePods()).find((p) => p.metadata!.uid === victim.metadata!.uid);
      if (!pod || !ready(pod) || pod.status!.containerStatuses![0]!.restartCount < 1) return false;
      return JSON.stringify(await adaptersOn(pod).catch(() => [])) === JSON.stringify(['chat', 'sql']);
    });
  });

  it('measures a baseline within vLLM’s 4 sequences, which a direct measurement agrees with; admission turns away more', async () => {
    const baseline = await waitFor('a baseline', 300_000, async () => (await status()).baseline);
    expect(baseline.capped).toBe(false);
    expect(baseline.maxConcurrency).toBeGreaterThanOrEqual(1);
    expect(baseline.maxConcurrency).toBeLessThanOrEqual(4);
    // Directly, at twice what vLLM runs at once, half the requests wait a whole answer; at the measured concurrency
    // none does. Compared side by side, as a ratio: the absolute times move with whatever else this machine runs (a
    // loaded run saw 1.6 s for the median at the measured concurrency, against a quiet run's 0.35 s; one CI run saw the
    // slowest of 8 at 0.83 s).
    const [pod] = (await enginePods()).filter(ready);
    const held = (await ttftAt(podUrl(pod!), baseline.maxConcurrency)).sort((a, b) => a - b);
    const queued = (await ttftAt(podUrl(pod!), 8)).sort((a, b) => a - b);
    const heldMedian = held[Math.floor((held.length - 1) / 2)]!;
    expect(queued[7]).toBeGreaterThan(2 * heldMedian);

    // The sidecar (port 8080, what the Service reaches) admits the measured concurrency and answers 429 above it.
    const answers = await burst(podUrl(pod!, 8080), baseline.maxConcurrency + 2);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused[0]!.retryAfter).toBe('1');
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(1);
  });

  // One update changes an argument and the revision together: each replica's restart on these CPUs takes about a
  // minute, so two updates would cost four. That an argument alone changes in place with no download does not depend on
  // the engine; the stand-in's end-to-end lifecycle test shows it (test/integration/e2e/lifecycle.test.ts).
  it('re-pulls a new revision when the source changes, and the new processes carry the new argument', async () => {
    const before = await hubBytes(REPO);
    const { sourceHash } = await status();
    expectOk(
      await runFerry([
        'apply',
        '-f',
        writeDoc(doc({ args: ['--seed=7'], revision: 'v2' })),
        '--wait',
        '--timeout',
        '9m',
      ]),
      'apply',
    );
    const s = await status();
    expect(s).toMatchObject({ phase: 'Ready', generation: 2 });
    expect(s.sourceHash).not.toBe(sourceHash);
    expect((await hubBytes(REPO)) - before).toBe(repoBytes(REPO, 'v2'));
    expect(s.download).toMatchObject({ state: 'Complete', bytes: repoBytes(REPO, 'v2') });
    const pods = (await enginePods()).filter(ready);
    expect(pods).toHaveLength(2);
    for (const pod of pods) {
      const [main] = containerPids(pod, 'vllm');
      expect(commandLine(main!)).toContain('--seed=7');
    }
  });

  it('deletes: the processes are gone, the retained volume still holds the weights', async () => {
    const uids = (await enginePods()).map((p) => p.metadata!.uid!);
    const { sourceHash } = await status();
    expectOk(await runFerry(['delete', NAME, '-n', kube.ns, '--cluster', cluster, '--wait']), 'delete');
    await waitFor('the engine pods to be gone', 120_000, async () => {
      const pods = await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${NAME}` });
      return pods.items.length === 0;
    });
    // The node agent removes a pod once its containers have stopped and their cgroups are gone.
    expect(agentContainers(uids)).toEqual([]);
    const pvc = await kube.core.readNamespacedPersistentVolumeClaim({ name: `${NAME}-weights`, namespace: kube.ns });
    const dir = volumeDir(pvc.spec!.volumeName!);
    const weights = join(dir, sourceHash!.slice(0, 8));
    expect(existsSync(join(weights, '.ferry-complete'))).toBe(true);
    expect(readdirSync(weights)).toContain('model.safetensors');
  });
});
