// What the benchmarks share: a counting proxy in front of the API server (so the worker's own requests are counted,
// not the controllers', KWOK's or the stand-in supervisor's), a worker process of the benchmark's own, extra
// simulated GPU nodes, and models served in parallel. Runs against the local stack (`npm run local:up`).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { deleteModel } from '../client/delete-model.js';
import { simulatedNode } from '../deploy/local/simulated-node.js';
import type { ModelRef } from '../workflows/contract/index.js';

export const repoRoot = join(import.meta.dirname, '..');

/** `.ferry/local.env`, written by `npm run local:up`. */
export function localEnv(): Record<string, string | undefined> & { KUBECONFIG: string; TEMPORAL_ADDRESS: string } {
  const text = readFileSync(join(repoRoot, '.ferry/local.env'), 'utf8');
  const env = Object.fromEntries(
    text
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  ) as Record<string, string>;
  if (!env.KUBECONFIG || !env.TEMPORAL_ADDRESS) throw new Error('.ferry/local.env is incomplete: run npm run local:up');
  return { ...env, KUBECONFIG: env.KUBECONFIG, TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS };
}

export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(localEnv().KUBECONFIG);
  return kc;
}

export const uniqueName = (prefix: string): string => `${prefix}-${randomBytes(3).toString('hex')}`;

/** A small seeded PRNG (mulberry32): uniform in [0, 1); the same seed gives the same sequence. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A command-line option that must be a whole number of at least `min`: its value, or exit 2 saying so. */
export function wholeOption(name: string, text: string, min = 1): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be a whole number of at least ${min}, got ${JSON.stringify(text)}\n`);
    process.exit(2);
  }
  return n;
}

/** The built CLI (`bin/ferry.js`) with `env` added to this process's; waits for it, and returns what it printed. */
export function ferrySync(
  args: string[],
  env: Record<string, string>,
): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(repoRoot, 'bin/ferry.js'), ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The machine, for every result. */
export function machine(): Record<string, string | number> {
  return {
    date: new Date().toISOString(),
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
  };
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

// ---------------------------------------------------------------------------------------------------------------
// The counting proxy

export interface ApiCounts {
  total: number;
  /** `VERB resource`, e.g. `LIST pods`, `WATCH deployments`, `PATCH services`. */
  byKind: Record<string, number>;
}

/**
 * Listens on 127.0.0.1 (plain HTTP, no authentication: loopback only) and forwards every request to the API server
 * with the admin kubeconfig's credentials, counting it. Watches stream through.
 */
export async function countingProxy(
  kc: KubeConfig,
  { holdHeaders = false }: { holdHeaders?: boolean } = {},
): Promise<{ kubeconfig: string; counts: () => ApiCounts; close: () => Promise<void> }> {
  const server = kc.getCurrentCluster()!.server;
  const upstream = new URL(server);
  const tls: RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  const counts: ApiCounts = { total: 0, byKind: {} };
  const proxy: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    counts.total++;
    const key = `${verbOf(req.method ?? 'GET', url)} ${resourceOf(url.pathname)}`;
    counts.byKind[key] = (counts.byKind[key] ?? 0) + 1;
    const headers = { ...req.headers, host: upstream.host };
    const out = (upstream.protocol === 'https:' ? httpsRequest : httpRequest)(
      {
        ...tls,
        hostname: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        // Headers go on at once, as the API server sends them, unless the benchmark plays a proxy that holds them
        // until the first byte of the body (--hold-headers): a quiet watch then has none until its first event or
        // bookmark (the worker copes: test/integration/activities/watch-renewal.test.ts).
        if (!holdHeaders) res.flushHeaders();
        up.pipe(res);
      },
    );
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(err));
    });
    req.pipe(out);
    res.on('close', () => out.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const dir = mkdtempSync(join(tmpdir(), 'ferry-bench-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{ name: proxy, cluster: { server: "http://127.0.0.1:' +
        port +
        '", insecure-skip-tls-verify: true } }]',
      'users: [{ name: proxy, user: {} }]',
      'contexts: [{ name: proxy, context: { cluster: proxy, user: proxy } }]',
      'current-context: proxy',
      '',
    ].join('\n'),
  );
  return {
    kubeconfig,
    counts: () => ({ total: counts.total, byKind: { ...counts.byKind } }),
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => resolve());
      }),
  };
}

function verbOf(method: string, url: URL): string {
  if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') return 'WATCH';
  if (method !== 'GET') return method;
  // A collection path ends in the resource's plural; an object path has a name after it.
  const parts = url.pathname.split('/').filter(Boolean);
  const nsIndex = parts.indexOf('namespaces');
  const afterNs = nsIndex >= 0 ? parts.slice(nsIndex + 2) : parts.slice(parts[0] === 'api' ? 2 : 3);
  return afterNs.length <= 1 ? 'LIST' : 'GET';
}

function resourceOf(path: string): string {
  const parts = path.split('/').filter(Boolean);
  const nsIndex = parts.indexOf('namespaces');
  if (nsIndex >= 0 && parts.length > nsIndex + 2) {
    const rest = parts.slice(nsIndex + 2);
    return rest.length >= 3 ? `${rest[0]}/${rest[2]}` : rest[0]!;
  }
  return parts.slice(parts[0] === 'api' ? 2 : 3)[0] ?? path;
}

// ---------------------------------------------------------------------------------------------------------------
// The worker, nodes, models

export interface BenchWorker {
  child: ChildProcess;
  cluster: string;
  /** CPU seconds (user + system) the process has used so far, and its resident memory in bytes. */
  usage(): { cpuSeconds: number; rssBytes: number };
  log(): string;
  stop(): Promise<void>;
}

/** The compiled worker (`dist/worker/main.js`, as the package and the image run it) for `cluster`. */
export async function startWorker(
  cluster: string,
  kubeconfig: string,
  extraEnv: Record<string, string> = {},
): Promise<BenchWorker> {
  const env = localEnv();
  // FERRY_BENCH_NODE_ARGS: node's own flags for the worker (e.g. `--trace-gc`, which NODE_OPTIONS does not take).
  const nodeArgs = process.env.FERRY_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, join(repoRoot, 'dist/worker/main.js')], {
    cwd: repoRoot,
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
      TEMPORAL_NAMESPACE: 'default',
      FERRY_CLUSTER: cluster,
      FERRY_ENDPOINT_MODE: 'override',
      FERRY_ENDPOINT_OVERRIDES: join(repoRoot, '.ferry/run/endpoints.json'),
      FERRY_SHUTDOWN_GRACE: '2s',
      FERRY_LOG_LEVEL: 'WARN',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // FERRY_BENCH_WORKER_LOG=FILE: the worker's whole output also goes to FILE, as it comes (a run that hangs has it).
  const logFile = process.env.FERRY_BENCH_WORKER_LOG;
  const take = (d: Buffer) => {
    output = (output + String(d)).slice(-200_000);
    if (logFile) appendFileSync(logFile, d);
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  // At WARN the worker logs nothing on start: wait until its task queue has a poller.
  const client = await temporalClient();
  const deadline = Date.now() + 120_000;
  for (;;) {
    const pollers = await client.workflowService
      .describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: `ferry-${cluster}` },
        taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
      })
      .then((d) => d.pollers?.length ?? 0)
      .catch(() => 0);
    if (pollers) break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start:\n${output}`);
    await sleep(250);
  }
  const pageSize = 4096;
  const ticks = 100;
  return {
    child,
    cluster,
    usage() {
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / ticks;
      const rssBytes = Number(fields[21]) * pageSize;
      return { cpuSeconds, rssBytes };
    },
    log: () => output,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

let client: Client | undefined;
export async function temporalClient(): Promise<Client> {
  client ??= new Client({ connection: await Connection.connect({ address: localEnv().TEMPORAL_ADDRESS }) });
  return client;
}

/** Enough simulated GPU nodes for `gpus` GPUs more than the local stack's two nodes hold (4 each). */
export async function ensureGpuNodes(kc: KubeConfig, gpus: number): Promise<string[]> {
  const objects = kc.makeApiClient(KubernetesObjectApi);
  const count = Math.max(0, Math.ceil(gpus / 4) - 2 + 1);
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `bench-gpu-node-${i}`;
    names.push(name);
    await objects.patch(
      simulatedNode(name, i % 2 ? 'us-east-1b' : 'us-east-1a'),
      undefined,
      undefined,
      'ferry-bench',
      true,
      PatchStrategy.ServerSideApply,
    );
  }
  const core = kc.makeApiClient(CoreV1Api);
  const end = Date.now() + 120_000;
  for (;;) {
    const nodes = await core.listNode();
    const ready = nodes.items.filter(
      (n) =>
        names.includes(n.metadata!.name!) &&
        n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    ).length;
    if (ready === names.length) return names;
    if (Date.now() > end) throw new Error(`only ${ready} of ${names.length} benchmark nodes became Ready`);
    await sleep(500);
  }
}

/** A TCP port free on 127.0.0.1 at this moment. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address ? address.port : 0;
}

export async function createNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  const core = kc.makeApiClient(CoreV1Api);
  const end = Date.now() + 60_000;
  while (!(await core.readNamespacedServiceAccount({ name: 'default', namespace: name }).catch(() => undefined))) {
    if (Date.now() > end) throw new Error(`namespace ${name} has no default ServiceAccount`);
    await sleep(250);
  }
}

export async function deleteNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name })
    .catch(() => undefined);
}

/** A ServedModel document whose simulated stages are instant: a 0 s download, a stand-in that loads at once. */
export function instantModel(name: string, namespace: string, cluster: string, gpus = 1) {
  return {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace,
      labels: { 'sim.ferry.dev/load-delay-seconds': '0', 'sim.ferry.dev/complete-delay': '0s' },
    },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      resources: { gpus },
      engine: { startupTimeout: '5m' },
      puller: { deadline: '5m' },
    },
  };
}

/** Deletes the models, waiting for each teardown (2 min at most each); a model already gone is fine. */
export async function deleteModels(client: Client, refs: ModelRef[]): Promise<void> {
  await inParallel(refs, 20, async (ref) => {
    await deleteModel(client, ref, { wait: true, timeoutMs: 120_000 }).catch(() => undefined);
  });
}

/** Runs `work` over `items` with at most `limit` at once. */
export async function inParallel<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: Math.min(limit, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

/**
 * Deletes the benchmark's extra nodes (`ensureGpuNodes`), so that the tests that expect pods on the local stack's own
 * `gpu-node-*` nodes find no others after a long benchmark.
 */
export async function removeGpuNodes(kc: KubeConfig, names: string[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(names.map((name) => core.deleteNode({ name }).catch(() => undefined)));
}

export interface Streamed {
  status: number;
  retryAfter: string | null;
  body: string;
  /** Until the answer's head (a 429), or until the first token (a 200). */
  ms: number;
  ttftMs?: number;
  /** Until the end of the answer. */
  totalMs: number;
  done: boolean;
}

/**
 * One streamed completion of `outputTokens` tokens (the engine told to ignore EOS); reads it to the end, within
 * `timeoutMs`.
 */
export async function streamOnce(url: string, outputTokens = 32, timeoutMs = 30_000): Promise<Streamed> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'a b c', max_tokens: outputTokens, ignore_eos: true, stream: true }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const ms = performance.now() - started;
  if (res.status !== 200 || !res.body) {
    const body = await res.text();
    const totalMs = performance.now() - started;
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body, ms, totalMs, done: false };
  }
  let text = '';
  let ttftMs: number | undefined;
  for await (const chunk of res.body) {
    text += Buffer.from(chunk).toString('utf8');
    if (ttftMs === undefined && text.includes('"text"')) ttftMs = performance.now() - started;
  }
  return {
    status: 200,
    retryAfter: null,
    body: '',
    ms,
    ...(ttftMs !== undefined ? { ttftMs } : {}),
    totalMs: performance.now() - started,
    done: text.includes('[DONE]'),
  };
}
