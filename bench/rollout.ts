// A new revision of examples/tiny.yaml on the real engine (`npm run local:up -- --engine vllm`), side by side in one
// run: Recreate (the engine replaced in place), a Canary beside the revision that serves (50 % for a pause, then all),
// and the same Canary of a model with a LoRA adapter and a latency goal (the candidate loads the adapter and measures
// its own baseline before its first request; every other request names the adapter). Each model has a front, which
// holds requests while no replica answers. A client sends one completion after another through the front, each on a
// connection of its own, from before the change until the new revision answers alone; the bench counts the failed
// requests, the slowest answer (what a held request waited), and the time from the apply until the new revision
// answers alone.
//
//   npm run bench:rollout                 (every row; `-- 'Canary with'` for the rows whose label begins so)
//
// Real: vLLM 0.32 for CPUs in pods of the node agent (each revision's its own), the puller from the local Hub, the
// front (Debian's HAProxy, the local stack's supervisor playing the front's pods), Ferry's worker and CLI. The new
// revision is new engine arguments, so the Canary's candidate pulls into its own volume and starts beside the current
// one: two real replicas at once.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import type { ModelStatus } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteNamespace,
  ferrySync as ferry,
  localEnv,
  machine,
  repoRoot,
  sleep,
  startWorker,
  uniqueName,
} from './lib.js';

const run = join(repoRoot, '.ferry/run');
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

if ((existsSync(join(run, 'engine')) ? readFileSync(join(run, 'engine'), 'utf8').trim() : 'sim') !== 'vllm') {
  throw new Error('the local stack runs the stand-in only: npm run local:up -- --engine vllm');
}

/** The model's front as the local stack's supervisor publishes it. */
function frontUrl(namespace: string): string | undefined {
  const urls = JSON.parse(readFileSync(join(run, 'endpoints.json'), 'utf8')) as Record<string, string>;
  return urls[`${namespace}/tiny`];
}

interface Answer {
  status: number;
  revision: string;
  startedAt: number;
  ms: number;
}

/**
 * One completion after another through `url` until stopped, each on a connection of its own, naming each of `models`
 * in turn (the base model, or a LoRA adapter).
 */
function steadyClient(url: string, models: string[]) {
  const answers: Answer[] = [];
  const failures: string[] = [];
  let stopped = false;
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const model = models[i % models.length]!;
      const startedAt = performance.now();
      try {
        const res = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', connection: 'close' },
          body: JSON.stringify({ model, prompt: 'Once upon a time', max_tokens: 8 }),
          signal: AbortSignal.timeout(10 * 60_000),
        });
        await res.arrayBuffer();
        const answer = {
          status: res.status,
          revision: res.headers.get('x-ferry-revision') ?? 'none',
          startedAt,
          ms: performance.now() - startedAt,
        };
        answers.push(answer);
        if (res.status !== 200) failures.push(`HTTP ${res.status} for ${model} from ${answer.revision}`);
      } catch (err) {
        failures.push(String(err));
      }
      await sleep(250);
    }
  })();
  return {
    answers,
    failures,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

const env = localEnv();
const kc = adminKubeConfig();
const cluster = uniqueName('bench-rollout');
const worker = await startWorker(cluster, env.KUBECONFIG, {
  FERRY_ENDPOINT_OVERRIDES: ['endpoints.json', 'node-agent-endpoints.json'].map((f) => join(run, f)).join(','),
});
const cliEnv = { KUBECONFIG: env.KUBECONFIG, TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS };
const dir = mkdtempSync(join(tmpdir(), 'ferry-bench-rollout-'));

const CANARY = { strategy: 'Canary', steps: [{ traffic: 50, gate: '20s' }] };
/**
 * The third row: the Canary of a model with a LoRA adapter (every other request names it) and a latency goal, so the
 * candidate loads the adapter and measures its own baseline before the front sends it a request.
 */
const WITH_ADAPTER = {
  lora: {
    enabled: true,
    maxLoras: 1,
    adapters: [{ name: 'sql', source: { huggingface: { repo: 'ferry-local/tiny-lora-sql', revision: 'v1' } } }],
  },
  // One request alone gets its first token in about 0.35 s here (test/real-engine/tiny.test.ts): a goal it meets.
  slo: { ttft: '1s', itl: '250ms', workload: { promptTokens: 32, outputTokens: 64 }, maxConcurrency: 8 },
};
const STRATEGIES: Record<string, { rollout: object; adapter?: true }> = {
  Recreate: { rollout: { strategy: 'Recreate' } },
  Canary: { rollout: CANARY },
  'Canary with an adapter and slo': { rollout: CANARY, adapter: true },
};
const results: Record<string, unknown> = { machine: machine() };

// `npm run bench:rollout -- Canary` runs the rows whose label begins with an argument.
const only = process.argv.slice(2);
const rows = Object.entries(STRATEGIES).filter(([label]) => only.length === 0 || only.some((o) => label.startsWith(o)));

try {
  for (const [label, { rollout, adapter }] of rows) {
    const namespace = uniqueName('bench-rollout');
    await createNamespace(kc, namespace);
    try {
      const doc = parseYaml(readFileSync(join(repoRoot, 'examples/tiny.yaml'), 'utf8')) as {
        metadata: { namespace: string };
        spec: Record<string, unknown> & {
          cluster?: string;
          engine: { args: string[]; startupTimeout?: string; lora?: object };
        };
      };
      doc.metadata.namespace = namespace;
      doc.spec.cluster = cluster;
      doc.spec.engine.startupTimeout = '10m';
      doc.spec.front = { holdFor: '10m' };
      doc.spec.rollout = rollout;
      if (adapter) {
        doc.spec.engine.lora = WITH_ADAPTER.lora;
        doc.spec.slo = WITH_ADAPTER.slo;
      }
      const file = join(dir, `${namespace}.yaml`);
      writeFileSync(file, stringify(doc));
      log(`${label}: serving r1`);
      const served = ferry(['serve', '-f', file, '--wait', '--timeout', '10m'], cliEnv);
      if (served.code !== 0) throw new Error(`ferry serve exited ${served.code}:\n${served.stdout}${served.stderr}`);
      let url: string | undefined;
      for (let i = 0; i < 120 && !(url = frontUrl(namespace)); i++) await sleep(500);
      if (!url) throw new Error("the model's front never appeared in endpoints.json");
      const client = steadyClient(url, adapter ? ['tiny', 'sql'] : ['tiny']);
      await sleep(5_000);

      // The new revision: other engine arguments (a smaller batch), so new engine pods.
      doc.spec.engine.args = [...doc.spec.engine.args, '--max-num-seqs=8'];
      writeFileSync(file, stringify(doc));
      log(`${label}: applying r2`);
      const applied = performance.now();
      const appliedAt = Date.now();
      const apply = ferry(['apply', '-f', file], cliEnv);
      if (apply.code !== 0) throw new Error(`ferry apply exited ${apply.code}:\n${apply.stdout}${apply.stderr}`);
      let status: ModelStatus | undefined;
      for (;;) {
        status = JSON.parse(
          ferry(['status', 'tiny', '-n', namespace, '--cluster', cluster, '-o', 'json'], cliEnv).stdout,
        ) as ModelStatus;
        if (status.phase === 'Ready' && status.observedGeneration === 2) break;
        if (status.rollout?.generation === 2 && status.rollout.state === 'Aborted') {
          throw new Error(`${label}: r2 was rolled back: ${status.rollout.message}`);
        }
        if (status.phase === 'Failed' || performance.now() - applied > 15 * 60_000) {
          throw new Error(`${label}: r2 did not become Ready: ${JSON.stringify(status.lastError)}`);
        }
        await sleep(2_000);
      }
      // Until r2 answers alone: five answers in a row from it.
      for (;;) {
        const last = client.answers.slice(-5);
        if (last.length === 5 && last.every((a) => a.revision === 'r2' && a.startedAt > applied)) break;
        await sleep(1_000);
      }
      const alone = client.answers.slice(-5)[0]!.startedAt;
      await client.stop();
      const during = client.answers.filter((a) => a.startedAt >= applied);
      const slowest = during.reduce((a, b) => (b.ms > a.ms ? b : a));
      const byRevision: Record<string, number> = {};
      for (const a of during) byRevision[a.revision] = (byRevision[a.revision] ?? 0) + 1;
      const row = {
        applyToR2AloneS: Math.round((alone - applied) / 100) / 10,
        requestsDuring: during.length,
        byRevision,
        failed: client.failures.length,
        ...(client.failures.length ? { failures: [...new Set(client.failures)].slice(0, 3) } : {}),
        slowestAnswerS: Math.round(Math.max(...during.map((a) => a.ms)) / 100) / 10,
        // When it was sent (seconds after the apply), and which revision answered it.
        slowestSentAtS: Math.round((slowest.startedAt - applied) / 100) / 10,
        slowestFrom: slowest.revision,
        medianAnswerMs: Math.round(during.map((a) => a.ms).sort((a, b) => a - b)[Math.floor(during.length / 2)]!),
        // Each step of r2's change: its name, when it began (seconds after the apply), how long it took.
        steps: status.timeline
          .filter((e) => e.generation === 2 && e.durationMs !== undefined)
          .map(
            (e) =>
              `${e.step} +${Math.round((Date.parse(e.startedAt) - appliedAt) / 100) / 10}s ${Math.round(e.durationMs! / 100) / 10}s ${e.outcome}`,
          ),
      };
      results[label] = row;
      log(`${label}: ${JSON.stringify(row)}`);
      const deleted = ferry(['delete', 'tiny', '-n', namespace, '--cluster', cluster, '--wait'], cliEnv);
      if (deleted.code !== 0) throw new Error(`ferry delete exited ${deleted.code}:\n${deleted.stderr}`);
    } finally {
      await deleteNamespace(kc, namespace);
    }
  }
} finally {
  await worker.stop();
}
console.log(JSON.stringify(results, null, 2));
