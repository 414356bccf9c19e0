// What every part of the chaos suite does the same way: a cluster of its own (namespace, task queue, worker), models
// served and deleted by `ferry … --wait` processes (the compiled CLI, as a user runs it), and the checks a user would
// make — did the model converge, with exactly its objects, and did status ever say Ready while the current revision
// had no ready pod.
import { AppsV1Api, BatchV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getModelStatus } from '../../client/model-status.js';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { workflowIdFor, type ModelRef } from '../../workflows/contract/index.js';
import {
  createNamespace,
  deleteModels,
  deleteNamespace,
  localEnv,
  percentile,
  repoRoot,
  sleep,
  startWorker,
  uniqueName,
  type BenchWorker,
} from '../lib.js';

export type Kind = 'serve' | 'update' | 'delete';
export const KINDS: Kind[] = ['serve', 'update', 'delete'];
const CONVERGE_TIMEOUT_MS = 5 * 60_000;
/** A `ferry … --wait` process still running this long after it started is killed: a trial never hangs the suite. */
const CLI_BOUND_MS = CONVERGE_TIMEOUT_MS + 60_000;
/** How long a started worker may take to log that it polls. */
const WORKER_START_MS = 120_000;

export const log = (msg: string) => process.stderr.write(`[chaos] ${new Date().toISOString()} ${msg}\n`);

export interface CliExit {
  code: number | null;
  /** The end of its stderr. */
  stderr: string;
}

export interface Outcome {
  converged: boolean;
  convergedAt: number;
  falseReady: number;
}

interface Audit {
  duplicates: string[];
  orphans: string[];
}

/** One part's cluster: its namespace, worker and models; `close()` deletes them all (their GPUs!). */
export interface Harness {
  cluster: string;
  namespace: string;
  models: ModelRef[];
  /** The Temporal client the part uses (to read and replay its workflows' histories). */
  client: Client;
  worker: BenchWorker;
  /** A new model's reference (remembered for the clean-up). */
  model(name: string): ModelRef;
  /** Starts a worker for the cluster (with `kubeconfig`, default the local stack's) and resolves once it polls. */
  startWorker(kubeconfig?: string): Promise<BenchWorker>;
  /** SIGKILLs the worker and resolves once it is gone. */
  killWorker(): Promise<void>;
  /** `ferry <kind> … --wait` for `ref` at `revision`; resolves with its exit. */
  operation(kind: Kind, ref: ModelRef, revision: string): Promise<CliExit>;
  /** Polls until the operation converged (or 5 minutes), counting false-Ready samples; `onStatus` sees each poll. */
  converge(
    kind: Kind,
    ref: ModelRef,
    generation: number,
    started: number,
    onStatus?: (status: ModelStatus | undefined, at: number) => void,
  ): Promise<Outcome>;
  /** What a person would look at when an operation did not converge: the workflow, its pending activities, the worker. */
  diagnose(ref: ModelRef): Promise<string>;
  /** The message of the model's workflow task failure, when its latest workflow task failed (a nondeterminism error). */
  lastTaskFailure(ref: ModelRef): Promise<string | undefined>;
  /** Duplicates and orphans once objects settle (a released puller's pod, a deleted model's pods): up to 15 s. */
  settledAudit(name: string, served: boolean): Promise<Audit>;
  /** Deletes every model of the part that is still served, waiting for each teardown. */
  deleteModels(): Promise<void>;
  close(): Promise<void>;
}

export async function harness(kc: KubeConfig, client: Client, prefix: string): Promise<Harness> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const cluster = uniqueName(prefix);
  const namespace = cluster;
  const docs = mkdtempSync(join(tmpdir(), 'ferry-chaos-'));
  const models: ModelRef[] = [];
  let kubeconfig = localEnv().KUBECONFIG;

  const document = (name: string, revision: string): string => {
    const file = join(docs, `${name}-${revision}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        apiVersion: 'ferry.dev/v1alpha1',
        kind: 'ServedModel',
        metadata: {
          name,
          namespace,
          labels: { 'sim.ferry.dev/load-delay-seconds': '2', 'sim.ferry.dev/complete-delay': '6s' },
        },
        spec: {
          cluster,
          source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision } },
          engine: { startupTimeout: '5m' },
          puller: { deadline: '5m' },
        },
      }),
    );
    return file;
  };

  const ferry = (args: string[]): Promise<CliExit> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [join(repoRoot, 'bin/ferry.js'), ...args], {
        env: { ...process.env, TEMPORAL_ADDRESS: localEnv().TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: 'default' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr = (stderr + String(d)).slice(-2_000)));
      const bound = setTimeout(() => {
        stderr += `\n[chaos] killed by the harness: still running after ${CLI_BOUND_MS / 1000} s`;
        child.kill('SIGKILL');
      }, CLI_BOUND_MS);
      child.on('exit', (code) => {
        clearTimeout(bound);
        resolve({ code, stderr });
      });
    });

  const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

  /** True when the Deployment's current revision has a ready pod (what Ready must mean). */
  const currentRevisionReady = async (name: string): Promise<boolean> => {
    const deployment = await apps.readNamespacedDeployment({ name, namespace }).catch(() => undefined);
    const revision = deployment?.metadata?.annotations?.['deployment.kubernetes.io/revision'];
    if (!revision) return false;
    const sets = await apps.listNamespacedReplicaSet({ namespace, labelSelector: `ferry.dev/model=${name}` });
    const current = sets.items.find(
      (rs) => rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] === revision,
    );
    const hash = current?.metadata?.labels?.['pod-template-hash'];
    if (!hash) return false;
    const pods = await core.listNamespacedPod({ namespace, labelSelector: `pod-template-hash=${hash}` });
    return pods.items.some((p) => !p.metadata?.deletionTimestamp && isReady(p));
  };

  /** Every object of the model, by kind, as names (terminating ones excluded). */
  const objectsOf = async (name: string): Promise<Record<string, string[]>> => {
    const labelSelector = `ferry.dev/model=${name}`;
    const live = <T extends { metadata?: { name?: string; deletionTimestamp?: Date } }>(items: T[]) =>
      items.filter((o) => !o.metadata?.deletionTimestamp).map((o) => o.metadata!.name!);
    const [cms, pvcs, deployments, services, jobs, pods] = await Promise.all([
      core.listNamespacedConfigMap({ namespace, labelSelector }),
      core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector }),
      apps.listNamespacedDeployment({ namespace, labelSelector }),
      core.listNamespacedService({ namespace, labelSelector }),
      batch.listNamespacedJob({ namespace, labelSelector }),
      core.listNamespacedPod({ namespace, labelSelector }),
    ]);
    const podsOf = (component: string) =>
      live(pods.items.filter((p) => p.metadata?.labels?.['app.kubernetes.io/component'] === component));
    return {
      ConfigMap: live(cms.items),
      PersistentVolumeClaim: live(pvcs.items),
      Deployment: live(deployments.items),
      Service: live(services.items),
      Job: live(jobs.items),
      'Pod (engine)': podsOf('engine'),
      'Pod (puller)': podsOf('puller'),
    };
  };

  const lastTaskFailure = async (ref: ModelRef): Promise<string | undefined> => {
    const history = await client.workflow
      .getHandle(workflowIdFor(ref))
      .fetchHistory()
      .catch(() => undefined);
    const tasks = (history?.events ?? []).filter(
      (e) => e.workflowTaskFailedEventAttributes || e.workflowTaskCompletedEventAttributes,
    );
    return tasks.at(-1)?.workflowTaskFailedEventAttributes?.failure?.message ?? undefined;
  };

  await createNamespace(kc, namespace);
  const h: Harness = {
    lastTaskFailure,
    client,
    cluster,
    namespace,
    models,
    worker: undefined as unknown as BenchWorker,
    model(name) {
      const ref = { cluster, namespace, name };
      models.push(ref);
      return ref;
    },
    async startWorker(config = kubeconfig) {
      kubeconfig = config;
      // Resolved on its own "polling" line: the task queue may still list a killed worker's poller for a minute.
      const started = await startWorker(cluster, config, { FERRY_LOG_LEVEL: 'INFO' });
      const deadline = performance.now() + WORKER_START_MS;
      while (!started.log().includes('"msg":"polling"')) {
        if (started.child.exitCode !== null) throw new Error(`the worker exited:\n${started.log()}`);
        if (performance.now() > deadline) {
          started.child.kill('SIGKILL');
          throw new Error(
            `the worker did not poll within ${WORKER_START_MS / 1000} s:\n${started.log().slice(-4_000)}`,
          );
        }
        await sleep(20);
      }
      h.worker = started;
      return started;
    },
    async killWorker() {
      const { child } = h.worker;
      child.kill('SIGKILL');
      await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', () => resolve())));
    },
    operation(kind, ref, revision) {
      const wait = ['--wait', '--timeout', '5m', '-o', 'json'];
      if (kind === 'serve') return ferry(['serve', '-f', document(ref.name, revision), ...wait]);
      if (kind === 'update') return ferry(['update', '-f', document(ref.name, revision), ...wait]);
      return ferry(['delete', ref.name, '-n', namespace, '--cluster', cluster, ...wait]);
    },
    async converge(kind, ref, generation, started, onStatus) {
      let falseReady = 0;
      let lastSample = 0;
      while (performance.now() - started < CONVERGE_TIMEOUT_MS) {
        if (kind === 'delete') {
          const closed = await client.workflow
            .getHandle(workflowIdFor(ref))
            .describe()
            .then((d) => d.status.name !== 'RUNNING')
            .catch(() => false);
          if (closed) return { converged: true, convergedAt: performance.now(), falseReady };
        } else {
          const status = await getModelStatus(client, ref).catch(() => undefined);
          onStatus?.(status, performance.now());
          const readyNow = status?.phase === 'Ready' && status.observedGeneration === status.generation;
          if (readyNow && performance.now() - lastSample >= 250) {
            lastSample = performance.now();
            if (!(await currentRevisionReady(ref.name))) falseReady++;
          }
          if (readyNow && status.observedGeneration >= generation) {
            return { converged: true, convergedAt: performance.now(), falseReady };
          }
        }
        await sleep(100);
      }
      return { converged: false, convergedAt: performance.now(), falseReady };
    },
    async diagnose(ref) {
      const lines: string[] = [];
      const described = await client.workflow
        .getHandle(workflowIdFor(ref))
        .describe()
        .catch((err: unknown) => err as Error);
      if (described instanceof Error) lines.push(`workflow: ${described.message}`);
      else {
        lines.push(`workflow: ${described.status.name}, ${described.historyLength} events`);
        const failed = await lastTaskFailure(ref);
        if (failed) lines.push(`  its last workflow task failed: ${failed.slice(0, 400)}`);
        for (const a of described.raw.pendingActivities ?? []) {
          const failure = a.lastFailure?.message ? `, last failure: ${a.lastFailure.message}` : '';
          lines.push(`  pending ${a.activityType?.name}: state ${a.state}, attempt ${a.attempt}${failure}`);
        }
      }
      const status = await getModelStatus(client, ref).catch(() => undefined);
      if (status) {
        const error = status.lastError ? `, last error ${status.lastError.reason}: ${status.lastError.message}` : '';
        lines.push(`status: ${status.phase} at generation ${status.generation}${error}`);
        lines.push(
          `  timeline: ${status.timeline
            .slice(-4)
            .map((e) => `${e.step} ${e.outcome ?? 'running'}`)
            .join(', ')}`,
        );
      }
      const worker = h.worker.child;
      lines.push(
        `worker: ${worker.exitCode === null ? 'running' : `exited with ${worker.exitCode}`}; the end of its log:`,
      );
      lines.push(
        ...h.worker
          .log()
          .trim()
          .split('\n')
          .slice(-12)
          .map((l) => `  ${l.slice(0, 300)}`),
      );
      return lines.join('\n');
    },
    async settledAudit(name, served) {
      const end = Date.now() + 15_000;
      for (;;) {
        const found = audit(await objectsOf(name), served);
        if ((found.duplicates.length === 0 && found.orphans.length === 0) || Date.now() > end) return found;
        await sleep(250);
      }
    },
    deleteModels: () => deleteModels(client, models),
    async close() {
      await deleteModels(client, models);
      await deleteNamespace(kc, namespace);
      await h.worker?.stop();
    },
  };
  return h;
}

/** What a served model must have: one of each, one engine pod, no puller. Duplicates and orphans otherwise. */
function audit(objects: Record<string, string[]>, served: boolean): Audit {
  const duplicates: string[] = [];
  const orphans: string[] = [];
  for (const [kind, names] of Object.entries(objects)) {
    const expected = served && !['Job', 'Pod (puller)'].includes(kind) ? 1 : 0;
    if (names.length > expected && expected === 1) duplicates.push(`${kind}: ${names.join(', ')}`);
    if (names.length > expected && expected === 0) orphans.push(`${kind}: ${names.join(', ')}`);
    if (names.length < expected) orphans.push(`${kind}: missing`);
  }
  return { duplicates, orphans };
}

/** The median of `values`, or null when there are none. */
export const median = (values: number[]): number | null => (values.length ? Math.round(percentile(values, 50)) : null);

/** `a ÷ b` to two decimals, or null. */
export const ratio = (a: number | null, b: number | null): number | null =>
  a !== null && b ? Math.round((100 * a) / b) / 100 : null;

/** Rows `name  value`, aligned, as the run prints its tables. */
export function table(title: string, rows: [string, string][]): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return `\n${title}\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n')}\n`;
}
