// Chaos, part one: the worker SIGKILLed at a random moment of a serve, an update or a delete, and started again at
// once. Each trial is one operation by a `ferry … --wait` process (the compiled CLI, as a user runs it) with one kill
// in it; the worker comes back as soon as the old one is dead. It checks what a user would: the `--wait` process
// exits 0 (no spurious exit), the model converges (Ready at the new generation; for a delete, its workflow closed
// and nothing of it left), with exactly its objects (no duplicate, no orphan: one root ConfigMap, PVC, Deployment,
// Service and engine pod, no puller left), and status never says Ready while the current revision has no ready pod
// (sampled every 250 ms). Times: restart → converged (from the moment the new worker polls), and each operation
// against the same operation without a kill, measured first in the same run.
//
//   npm run chaos -- [--kills 50] [--baseline 2] [--seed 1] [--kinds serve,update,delete]
//
// Simulated: KWOK pods, the engine stand-in (a 6 s download, a 2 s load). Real: Temporal, the API server, the
// controllers, the worker processes and the CLI.
import { AppsV1Api, BatchV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getModelStatus } from '../client/model-status.js';
import { workflowIdFor, type ModelRef } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteModels,
  deleteNamespace,
  localEnv,
  machine,
  mulberry32,
  percentile,
  repoRoot,
  sleep,
  startWorker,
  temporalClient,
  uniqueName,
  type BenchWorker,
} from './lib.js';

const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '50' },
    baseline: { type: 'string', default: '2' },
    seed: { type: 'string', default: '1' },
    kinds: { type: 'string', default: 'serve,update,delete' },
  },
});
const kills = Number(values.kills);
const baselineRounds = Number(values.baseline);

// The kill moments are the same for the same seed.
const random = mulberry32(Number(values.seed));

const kc = adminKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const batch = kc.makeApiClient(BatchV1Api);
const client = await temporalClient();
const cluster = uniqueName('chaos');
const namespace = cluster;
const docs = mkdtempSync(join(tmpdir(), 'ferry-chaos-'));
const log = (msg: string) => process.stderr.write(`[chaos] ${new Date().toISOString()} ${msg}\n`);
const CONVERGE_TIMEOUT_MS = 5 * 60_000;

type Kind = 'serve' | 'update' | 'delete';
const KINDS: Kind[] = ['serve', 'update', 'delete'];
/** The operations that get a kill (the others of a model's life still run, fault-free, to move it along). */
const killed = new Set(values.kinds.split(',').map((k) => k.trim()));
if (![...killed].every((k) => KINDS.includes(k as Kind))) throw new Error(`--kinds takes ${KINDS.join(',')}`);

function document(name: string, revision: string): string {
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
}

/** `ferry …` as a process; resolves with its exit code and the end of its stderr. */
function ferry(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(repoRoot, 'bin/ferry.js'), ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: localEnv().TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: 'default' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr = (stderr + String(d)).slice(-2_000)));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

function operation(kind: Kind, ref: ModelRef, revision: string): Promise<{ code: number | null; stderr: string }> {
  const wait = ['--wait', '--timeout', '5m', '-o', 'json'];
  if (kind === 'serve') return ferry(['serve', '-f', document(ref.name, revision), ...wait]);
  if (kind === 'update') return ferry(['update', '-f', document(ref.name, revision), ...wait]);
  return ferry(['delete', ref.name, '-n', namespace, '--cluster', cluster, '--wait', '-o', 'json']);
}

const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/** True when the Deployment's current revision has a ready pod (what Ready must mean). */
async function currentRevisionReady(name: string): Promise<boolean> {
  const deployment = await apps.readNamespacedDeployment({ name, namespace }).catch(() => undefined);
  const revision = deployment?.metadata?.annotations?.['deployment.kubernetes.io/revision'];
  if (!revision) return false;
  const sets = await apps.listNamespacedReplicaSet({ namespace, labelSelector: `ferry.dev/model=${name}` });
  const current = sets.items.find((rs) => rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] === revision);
  const hash = current?.metadata?.labels?.['pod-template-hash'];
  if (!hash) return false;
  const pods = await core.listNamespacedPod({ namespace, labelSelector: `pod-template-hash=${hash}` });
  return pods.items.some((p) => !p.metadata?.deletionTimestamp && isReady(p));
}

/** Every object of the model, by kind, as names (terminating ones excluded). */
async function objectsOf(name: string): Promise<Record<string, string[]>> {
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
}

/** What a served model must have: one of each, one engine pod, no puller. Duplicates and orphans otherwise. */
function audit(objects: Record<string, string[]>, served: boolean): { duplicates: string[]; orphans: string[] } {
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

interface Outcome {
  converged: boolean;
  convergedAt: number;
  falseReady: number;
}

/** Polls until the operation has converged; counts status samples that say Ready while no current pod is. */
async function converge(kind: Kind, ref: ModelRef, generation: number, started: number): Promise<Outcome> {
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
}

/** Objects settle a moment after convergence (a released puller's pod, a deleted model's pods): up to 15 s. */
async function settledAudit(name: string, served: boolean): Promise<{ duplicates: string[]; orphans: string[] }> {
  const end = Date.now() + 15_000;
  for (;;) {
    const found = audit(await objectsOf(name), served);
    if ((found.duplicates.length === 0 && found.orphans.length === 0) || Date.now() > end) return found;
    await sleep(250);
  }
}

interface Trial {
  trial: number;
  kind: Kind;
  model: string;
  killAtMs?: number;
  /** The kill came after the operation had converged (it tested nothing but the restart). */
  killedAfterConverged?: boolean;
  restartToConvergedMs?: number;
  totalMs: number;
  converged: boolean;
  cliExit: number | null;
  cliError?: string;
  duplicates: string[];
  orphans: string[];
  falseReady: number;
}

/**
 * A worker process for the cluster, resolved once it polls (its own "polling" line: the task queue may still list
 * the killed worker's poller for a minute).
 */
async function newWorker(): Promise<BenchWorker> {
  const started = await startWorker(cluster, localEnv().KUBECONFIG, { FERRY_LOG_LEVEL: 'INFO' });
  while (!started.log().includes('"msg":"polling"')) {
    if (started.child.exitCode !== null) throw new Error(`the worker exited:\n${started.log()}`);
    await sleep(20);
  }
  return started;
}

let worker = await newWorker();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}
const models: ModelRef[] = [];

/** One operation; with `killWithinMs`, the worker is SIGKILLed at a random moment within it and started again. */
async function run(
  trial: number,
  kind: Kind,
  ref: ModelRef,
  revision: string,
  generation: number,
  killWithinMs?: number,
): Promise<Trial> {
  const started = performance.now();
  const cli = operation(kind, ref, revision);
  const outcome = converge(kind, ref, generation, started);
  let killAtMs: number | undefined;
  let backAt: number | undefined;
  let killedAfterConverged = false;
  if (killWithinMs !== undefined) {
    killAtMs = Math.round(random() * killWithinMs);
    const done = await Promise.race([outcome.then(() => true), sleep(killAtMs).then(() => false)]);
    killedAfterConverged = done;
    worker.child.kill('SIGKILL');
    await new Promise<void>((resolve) =>
      worker.child.exitCode !== null ? resolve() : worker.child.on('exit', () => resolve()),
    );
    worker = await newWorker();
    backAt = performance.now();
  }
  // A `--wait` process that failed may leave nothing to converge: give the model 30 s more, then record the trial.
  const gaveUp = cli.then(async (e): Promise<Outcome> => {
    if (e.code === 0) return outcome;
    await sleep(30_000);
    return { converged: false, convergedAt: performance.now(), falseReady: 0 };
  });
  const { converged, convergedAt, falseReady } = await Promise.race([outcome, gaveUp]);
  const exit = await cli;
  const { duplicates, orphans } = converged
    ? await settledAudit(ref.name, kind !== 'delete')
    : { duplicates: [], orphans: ['did not converge'] };
  return {
    trial,
    kind,
    model: ref.name,
    ...(killAtMs !== undefined ? { killAtMs, killedAfterConverged } : {}),
    ...(backAt !== undefined && !killedAfterConverged
      ? { restartToConvergedMs: Math.max(0, Math.round(convergedAt - backAt)) }
      : {}),
    totalMs: Math.round(convergedAt - started),
    converged,
    cliExit: exit.code,
    ...(exit.code !== 0 ? { cliError: exit.stderr.trim().split('\n').slice(-3).join(' / ') } : {}),
    duplicates,
    orphans,
    falseReady,
  };
}

/** serve → update (new revision: the whole sequence again) → delete, on a new model; kills as asked. */
async function lifecycle(prefix: string, trials: number, killWithin?: Record<Kind, number>): Promise<Trial[]> {
  const out: Trial[] = [];
  for (let i = 0; out.length < trials; i++) {
    const ref = { cluster, namespace, name: `${prefix}${i}` };
    models.push(ref);
    for (const [step, kind] of KINDS.entries()) {
      if (out.length >= trials) break;
      const revision = kind === 'serve' ? 'main' : `rev-${i}`;
      const killWithinMs = killWithin && killed.has(kind) ? killWithin[kind] : undefined;
      const t = await run(out.length + 1, kind, ref, revision, step + 1, killWithinMs);
      // An operation without a kill only moves the model along: it is no trial.
      if (killWithin && killWithinMs === undefined) {
        if (!t.converged) return out;
        continue;
      }
      out.push(t);
      const kill =
        t.killAtMs !== undefined ? ` kill at ${t.killAtMs} ms${t.killedAfterConverged ? ' (after)' : ''}` : '';
      const back = t.restartToConvergedMs !== undefined ? `, restart → converged ${t.restartToConvergedMs} ms` : '';
      const why = t.cliError ? ` (${t.cliError})` : '';
      log(
        `${prefix} ${t.trial}/${trials} ${kind} ${ref.name}:${kill}${back}, ${t.totalMs} ms, exit ${t.cliExit}${why}`,
      );
      if (!t.converged) return out;
    }
  }
  return out;
}

try {
  await createNamespace(kc, namespace);
  const baseline = await lifecycle('b', baselineRounds * KINDS.length);
  const fastest = (kind: Kind) => {
    const ms = baseline.filter((t) => t.kind === kind && t.converged).map((t) => t.totalMs);
    return ms.length ? percentile(ms, 50) : NaN;
  };
  const baselineMs = { serve: fastest('serve'), update: fastest('update'), delete: fastest('delete') };
  // The kill lands anywhere in the operation's fault-free duration.
  const trials = await lifecycle('k', kills, baselineMs);

  const restarts = trials.filter((t) => t.restartToConvergedMs !== undefined).map((t) => t.restartToConvergedMs!);
  const ratio = (kind: Kind) => {
    const ms = trials.filter((t) => t.kind === kind && t.converged).map((t) => t.totalMs);
    return ms.length ? Math.round((100 * percentile(ms, 50)) / baselineMs[kind]) / 100 : null;
  };
  const summary = {
    trials: trials.length,
    converged: trials.filter((t) => t.converged).length,
    duplicates: trials.reduce((n, t) => n + t.duplicates.length, 0),
    orphans: trials.reduce((n, t) => n + t.orphans.length, 0),
    falseReadySamples: trials.reduce((n, t) => n + t.falseReady, 0) + baseline.reduce((n, t) => n + t.falseReady, 0),
    spuriousExits: trials.filter((t) => t.cliExit !== 0).length,
    killsMidOperation: restarts.length,
    restartToConvergedP50Ms: restarts.length ? Math.round(percentile(restarts, 50)) : null,
    restartToConvergedP90Ms: restarts.length ? Math.round(percentile(restarts, 90)) : null,
    restartToConvergedMaxMs: restarts.length ? Math.max(...restarts) : null,
    baselineP50Ms: baselineMs,
    medianVsBaseline: { serve: ratio('serve'), update: ratio('update'), delete: ratio('delete') },
  };
  const rows: [string, string][] = [
    ['trials (SIGKILL each)', String(summary.trials)],
    ['converged', `${summary.converged}/${summary.trials}`],
    ['duplicate objects', String(summary.duplicates)],
    ['orphan objects', String(summary.orphans)],
    ['false-Ready samples', String(summary.falseReadySamples)],
    ['--wait clients: spurious exits', String(summary.spuriousExits)],
    ['kills that landed mid-operation', String(summary.killsMidOperation)],
    [
      'restart → converged, p50 / p90 / max',
      `${summary.restartToConvergedP50Ms} / ${summary.restartToConvergedP90Ms} / ${summary.restartToConvergedMaxMs} ms`,
    ],
    [
      'fault-free serve / update / delete (p50)',
      `${baselineMs.serve} / ${baselineMs.update} / ${baselineMs.delete} ms`,
    ],
    [
      'with a kill, median ÷ fault-free: serve / update / delete',
      `${summary.medianVsBaseline.serve} / ${summary.medianVsBaseline.update} / ${summary.medianVsBaseline.delete}`,
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  process.stderr.write(`\n${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n\n`);
  const failed = summary.converged < summary.trials || summary.duplicates || summary.orphans;
  if (failed || summary.falseReadySamples || summary.spuriousExits) process.exitCode = 1;
  console.log(
    JSON.stringify(
      { machine: machine(), config: { kills, baseline: baselineRounds, seed: values.seed }, summary, trials },
      null,
      2,
    ),
  );
} catch (err) {
  process.stderr.write(`[chaos] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await cleanUp();
}

/** Deletes the run's models (their GPUs!), namespace and worker; also on Ctrl-C or SIGTERM. */
async function cleanUp(): Promise<void> {
  await deleteModels(client, models);
  await deleteNamespace(kc, namespace);
  await worker.stop();
  await client.connection.close();
}
