// examples/tiny.yaml on the real engine (`npm run local:up -- --engine vllm`): serve → Ready, split into its steps
// (download, release, rollout, engine start), and the memory of the whole local stack with one real replica; and,
// with --startup, how long the stack takes to come up warm (everything installed, nothing running).
//
//   npm run bench:real-engine -- [--trials 3] [--startup]
//
// Real: the puller (huggingface_hub from the local Hub), vLLM 0.32 for CPUs in a pod of the node agent, Ferry. The
// model is tiny (0.6 MB, 2 layers), so the download is short and the engine's start is mostly Python importing vLLM.
// The bars: serve → Ready ≤ 120 s warm; the stack with one replica ≤ 8 GiB; a warm local:up ≤ 60 s.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml, stringify } from 'yaml';
import type { ModelStatus } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteNamespace,
  ferrySync as ferry,
  localEnv,
  machine,
  percentile,
  repoRoot,
  startWorker,
  uniqueName,
} from './lib.js';

const { values } = parseArgs({
  options: { trials: { type: 'string', default: '3' }, startup: { type: 'boolean', default: false } },
});
const trials = Number(values.trials);
const run = join(repoRoot, '.ferry/run');
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

if ((existsSync(join(run, 'engine')) ? readFileSync(join(run, 'engine'), 'utf8').trim() : 'sim') !== 'vllm') {
  throw new Error('the local stack runs the stand-in only: npm run local:up -- --engine vllm');
}

/** Proportional set size (shared pages divided among their users) of every process, by pid, in kB. */
function pss(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    return Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

function rss(pid: number): number {
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Every process of the local stack: its components' process groups and the node agent's containers. */
function stackPids(): number[] {
  const groups = new Set<number>();
  for (const file of readdirSync(run).filter((f) => f.endsWith('.pid'))) {
    groups.add(Number(readFileSync(join(run, file), 'utf8')));
  }
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (groups.has(pgrp)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  const containers = '/sys/fs/cgroup/memory/ferry-node-agent';
  if (existsSync(containers)) {
    for (const dir of readdirSync(containers, { withFileTypes: true }).filter((d) => d.isDirectory())) {
      const procs = readFileSync(join(containers, dir.name, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter(Boolean);
      pids.push(...procs.map(Number));
    }
  }
  return [...new Set(pids)];
}

function memory(): { rssGiB: number; pssGiB: number; processes: number } {
  const pids = stackPids();
  const kb = (f: (p: number) => number) => pids.reduce((sum, p) => sum + f(p), 0);
  return { rssGiB: kb(rss) / 2 ** 20, pssGiB: kb(pss) / 2 ** 20, processes: pids.length };
}

const results: Record<string, unknown> = { machine: machine() };

if (values.startup) {
  log('warm start: local:down, then local:up -- --engine vllm');
  spawnSync('bash', [join(repoRoot, 'deploy/local/down.sh')], { stdio: 'ignore' });
  const started = performance.now();
  const up = spawnSync('bash', [join(repoRoot, 'deploy/local/up.sh'), '--engine', 'vllm'], { encoding: 'utf8' });
  if (up.status !== 0) throw new Error(`local:up failed:\n${up.stderr}`);
  results.warmStartSeconds = Math.round((performance.now() - started) / 100) / 10;
}

const env = localEnv();
const kc = adminKubeConfig();
const cluster = uniqueName('bench-real');
const worker = await startWorker(cluster, env.KUBECONFIG, {
  FERRY_ENDPOINT_OVERRIDES: ['endpoints.json', 'node-agent-endpoints.json'].map((f) => join(run, f)).join(','),
});
const cliEnv = { KUBECONFIG: env.KUBECONFIG, TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS };
const dir = mkdtempSync(join(tmpdir(), 'ferry-bench-real-'));
const rows: Record<string, number>[] = [];
try {
  for (let trial = 1; trial <= trials; trial++) {
    const namespace = uniqueName('bench-real');
    await createNamespace(kc, namespace);
    try {
      const doc = parseYaml(readFileSync(join(repoRoot, 'examples/tiny.yaml'), 'utf8')) as {
        metadata: { namespace: string };
        spec: { cluster?: string };
      };
      doc.metadata.namespace = namespace;
      doc.spec.cluster = cluster;
      const file = join(dir, `${namespace}.yaml`);
      writeFileSync(file, stringify(doc));
      const started = performance.now();
      const served = ferry(['serve', '-f', file, '--wait', '--timeout', '10m'], cliEnv);
      const wall = (performance.now() - started) / 1000;
      if (served.code !== 0) throw new Error(`ferry serve exited ${served.code}:\n${served.stdout}${served.stderr}`);
      const status = JSON.parse(
        ferry(['status', 'tiny', '-n', namespace, '--cluster', cluster, '-o', 'json'], cliEnv).stdout,
      ) as ModelStatus;
      const took = (step: string) => (status.timeline.find((t) => t.step === step)?.durationMs ?? 0) / 1000;
      const mem = memory();
      const row = {
        trial,
        serveToReadyS: Math.round(wall * 10) / 10,
        downloadS: took('download'),
        releaseS: took('release'),
        rolloutS: took('rollout'),
        engineStartS: took('startup'),
        stackRssGiB: Math.round(mem.rssGiB * 100) / 100,
        stackPssGiB: Math.round(mem.pssGiB * 100) / 100,
        processes: mem.processes,
      };
      rows.push(row);
      log(JSON.stringify(row));
      const deleted = ferry(['delete', 'tiny', '-n', namespace, '--cluster', cluster, '--wait'], cliEnv);
      if (deleted.code !== 0)
        throw new Error(`ferry delete exited ${deleted.code}:\n${deleted.stdout}${deleted.stderr}`);
    } finally {
      await deleteNamespace(kc, namespace);
    }
  }
} finally {
  await worker.stop();
}

const median = (key: string) =>
  percentile(
    rows.map((r) => r[key]!),
    50,
  );
results.trials = rows;
results.median = Object.fromEntries(
  ['serveToReadyS', 'downloadS', 'releaseS', 'rolloutS', 'engineStartS', 'stackRssGiB', 'stackPssGiB'].map((k) => [
    k,
    median(k),
  ]),
);
results.bars = {
  'serve → Ready ≤ 120 s (median)': median('serveToReadyS') <= 120,
  'stack with one real replica ≤ 8 GiB (RSS, max)': Math.max(...rows.map((r) => r.stackRssGiB!)) <= 8,
  ...(results.warmStartSeconds !== undefined
    ? { 'warm local:up ≤ 60 s': (results.warmStartSeconds as number) <= 60 }
    : {}),
};
console.log(JSON.stringify(results, null, 2));
