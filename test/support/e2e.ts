// End-to-end plumbing: a real worker process (worker/main.ts with the real activities) on a cluster name of its own,
// the `ferry` CLI as a child process, and the local cluster's objects of one model.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { get } from 'node:http';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { readLocalEnv, repoRoot } from './local-env.js';
import { runFerry, type FerryRun } from './ferry-worker.js';
import type { Clients } from './kube.js';
import type { Doc } from './workflow-harness.js';

export interface WorkerProcess {
  child: ChildProcess;
  cluster: string;
  log(): string;
  /** SIGKILL: no drain, no goodbye — in-flight activities are left to time out. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** How to run the worker: Node's arguments and the directory to run them in. */
export interface WorkerLaunch {
  args: string[];
  cwd: string;
}

/** The worker from this checkout's sources. */
const FROM_SOURCES: WorkerLaunch = { args: ['--import', 'tsx', join(repoRoot, 'worker/main.ts')], cwd: repoRoot };

/**
 * Starts the worker (by default `node --import tsx worker/main.ts`) for `cluster` and waits until it polls its task
 * queue. `extraEnv` is added to the worker's environment last (Temporal's TLS variables, say).
 */
export async function startWorkerProcess(
  cluster: string,
  temporalAddress = readLocalEnv().TEMPORAL_ADDRESS,
  extraEnv: Record<string, string> = {},
  launch: WorkerLaunch = FROM_SOURCES,
): Promise<WorkerProcess> {
  const env = readLocalEnv();
  const child = spawn(process.execPath, launch.args, {
    cwd: launch.cwd,
    env: {
      ...process.env,
      KUBECONFIG: env.KUBECONFIG,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      FERRY_CLUSTER: cluster,
      FERRY_ENDPOINT_MODE: 'override',
      // Kept up to date by the engine stand-in supervisor that `npm run local:up` starts, and for the real engine's
      // pods by the node agent (`--engine vllm`; without it the file is absent, an empty map).
      FERRY_ENDPOINT_OVERRIDES: ['endpoints.json', 'node-agent-endpoints.json']
        .map((f) => join(repoRoot, '.ferry/run', f))
        .join(','),
      FERRY_SHUTDOWN_GRACE: '2s',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 120_000;
  while (!/"msg":"polling"/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`worker for ${cluster} did not start:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    cluster,
    log: () => output,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A TCP port free on 127.0.0.1 right now (for a worker's health or metrics endpoint). */
export { freePort } from '../../bench/lib.js';

/**
 * The URLs the local stack's supervisor publishes (`.ferry/run/endpoints.json`): `<ns>/<model>` the model's Service,
 * `<ns>/<model>-engine` its engine's own (with a front), `<ns>/<model>/<pod>` a pod's.
 */
export function localUrls(): Record<string, string> {
  return JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;
}

/**
 * One GET on a connection of its own, as a new client sees it: a Service (kube-proxy, or the local stack's port that
 * plays it) picks a pod per connection, so a kept-alive connection opened before the model had a front would still
 * reach the engine behind it. Resolves with the status and headers; rejects on no answer within `timeoutMs`.
 */
export function getOnce(
  url: string,
  timeoutMs = 30_000,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/**
 * A model document for the end-to-end tests on the local stack: the Hub's small Qwen at `main`, whose stand-in "loads"
 * for 1 s and whose simulated download takes `download` (KWOK's pods run nothing), on `cluster`'s worker.
 */
export function simulatedModelDoc(
  namespace: string,
  cluster: string,
  name: string,
  download: string,
  patch: (d: Doc) => void = () => undefined,
): Doc {
  const doc: Doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace,
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': download },
    },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      engine: { startupTimeout: '3m' },
      puller: { deadline: '5m' },
    },
  };
  patch(doc);
  return doc;
}

export const uniqueCluster = (prefix: string): string => `${prefix}-${randomBytes(3).toString('hex')}`;

/** `ferry … -o json`, parsed; throws with the CLI's output when it fails. */
export async function ferryJson<T>(args: string[], env?: Record<string, string>): Promise<T> {
  const run = await runFerry([...args, '-o', 'json'], env);
  if (run.code !== 0) throw new Error(`ferry ${args.join(' ')} exited ${run.code}:\n${run.stdout}\n${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

export function expectOk(run: FerryRun, what: string): FerryRun {
  if (run.code !== 0) throw new Error(`${what} exited ${run.code}:\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
  return run;
}

/** Every object of a model in its namespace, by our label, as `Kind/name` (pods included). */
export async function modelObjects(c: Clients, namespace: string, name: string): Promise<string[]> {
  const labelSelector = `ferry.dev/model=${name}`;
  const [deps, svcs, jobs, cms, pvcs, pods] = await Promise.all([
    c.apps.listNamespacedDeployment({ namespace, labelSelector }),
    c.core.listNamespacedService({ namespace, labelSelector }),
    c.batch.listNamespacedJob({ namespace, labelSelector }),
    c.core.listNamespacedConfigMap({ namespace, labelSelector }),
    c.core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector }),
    c.core.listNamespacedPod({ namespace, labelSelector }),
  ]);
  const named = (kind: string, items: { metadata?: { name?: string } }[]) =>
    items.map((o) => `${kind}/${o.metadata?.name}`);
  return [
    ...named('Deployment', deps.items),
    ...named('Service', svcs.items),
    ...named('Job', jobs.items),
    ...named('ConfigMap', cms.items),
    ...named('PersistentVolumeClaim', pvcs.items),
    ...named('Pod', pods.items),
  ].sort();
}

/**
 * Terminates every running model workflow of `cluster`: a test that failed half-way must not leave workflows behind
 * (their worker is gone with the test, so nothing else would ever end them).
 */
export async function terminateModelsOf(
  cluster: string,
  temporalAddress = readLocalEnv().TEMPORAL_ADDRESS,
): Promise<void> {
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const client = new Client({ connection });
    const query = `FerryCluster = "${cluster}" AND ExecutionStatus = "Running"`;
    for await (const wf of client.workflow.list({ query })) {
      await client.workflow
        .getHandle(wf.workflowId, wf.runId)
        .terminate('test finished')
        .catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
}
