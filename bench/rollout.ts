// A new revision of examples/tiny.yaml on the real engine (`npm run local:up -- --engine vllm`), two ways side by side
// in one run: Recreate (the engine replaced in place) and a Canary beside the revision that serves (50 % for a pause,
// then all). Both models have a front, which holds requests while no replica answers. A client sends one completion
// after another through the front, each on a connection of its own, from before the change until the new revision
// answers alone; the bench counts the failed requests, the slowest answer (what a held request waited), and the time
// from the apply until the new revision answers alone.
//
//   npm run bench:rollout
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

/** One completion after another through `url` until stopped, each on a connection of its own. */
function steadyClient(url: string) {
  const answers: Answer[] = [];
  const failures: string[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const startedAt = performance.now();
      try {
        const res = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', connection: 'close' },
          body: JSON.stringify({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 8 }),
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
        if (res.status !== 200) failures.push(`HTTP ${res.status}`);
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

const STRATEGIES = {
  Recreate: { strategy: 'Recreate' },
  Canary: { strategy: 'Canary', steps: [{ traffic: 50, gate: '20s' }] },
};
const results: Record<string, unknown> = { machine: machine() };

try {
  for (const [label, rollout] of Object.entries(STRATEGIES)) {
    const namespace = uniqueName('bench-rollout');
    await createNamespace(kc, namespace);
    try {
      const doc = parseYaml(readFileSync(join(repoRoot, 'examples/tiny.yaml'), 'utf8')) as {
        metadata: { namespace: string };
        spec: Record<string, unknown> & { cluster?: string; engine: { args: string[]; startupTimeout?: string } };
      };
      doc.metadata.namespace = namespace;
      doc.spec.cluster = cluster;
      doc.spec.engine.startupTimeout = '10m';
      doc.spec.front = { holdFor: '10m' };
      doc.spec.rollout = rollout;
      const file = join(dir, `${namespace}.yaml`);
      writeFileSync(file, stringify(doc));
      log(`${label}: serving r1`);
      const served = ferry(['serve', '-f', file, '--wait', '--timeout', '10m'], cliEnv);
      if (served.code !== 0) throw new Error(`ferry serve exited ${served.code}:\n${served.stdout}${served.stderr}`);
      let url: string | undefined;
      for (let i = 0; i < 120 && !(url = frontUrl(namespace)); i++) await sleep(500);
      if (!url) throw new Error("the model's front never appeared in endpoints.json");
      const client = steadyClient(url);
      await sleep(5_000);

      // The new revision: other engine arguments (a smaller batch), so new engine pods.
      doc.spec.engine.args = [...doc.spec.engine.args, '--max-num-seqs=8'];
      writeFileSync(file, stringify(doc));
      log(`${label}: applying r2`);
      const applied = performance.now();
      const apply = ferry(['apply', '-f', file], cliEnv);
      if (apply.code !== 0) throw new Error(`ferry apply exited ${apply.code}:\n${apply.stdout}${apply.stderr}`);
      let status: ModelStatus | undefined;
      for (;;) {
        status = JSON.parse(
          ferry(['status', 'tiny', '-n', namespace, '--cluster', cluster, '-o', 'json'], cliEnv).stdout,
        ) as ModelStatus;
        if (status.phase === 'Ready' && status.observedGeneration === 2) break;
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
      const byRevision: Record<string, number> = {};
      for (const a of during) byRevision[a.revision] = (byRevision[a.revision] ?? 0) + 1;
      const row = {
        applyToR2AloneS: Math.round((alone - applied) / 100) / 10,
        requestsDuring: during.length,
        byRevision,
        failed: client.failures.length,
        slowestAnswerS: Math.round(Math.max(...during.map((a) => a.ms)) / 100) / 10,
        medianAnswerMs: Math.round(during.map((a) => a.ms).sort((a, b) => a - b)[Math.floor(during.length / 2)]!),
        steps: status.timeline
          .filter((e) => e.generation === 2 && e.durationMs !== undefined)
          .map((e) => `${e.step} ${Math.round(e.durationMs! / 100) / 10}s ${e.outcome}`),
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
