// How fast Ferry reacts, with the worker's watch on and the default workflow options (safety net 6 h, so every
// reaction here comes from the watch): a Ready model's engine pod deleted → status Degraded; its engine reported
// crash-looping → Degraded; its Service or Deployment deleted → back; its weights PVC deleted → Degraded → Ready
// again; an update → Deployment patched; a delete → the Deployment going. Update and delete are timed twice: from
// the library call, and from starting a `ferry` process (the compiled CLI, its modules from Node's compile cache: Node's start,
// reading the settings and the document, sending the update; `ferry update -f` and `ferry delete --cluster`, without
// --wait), which in turn sends its update before the Temporal SDK loads and prints the answer without it (as people
// run it), and leaves it to the SDK (`FERRY_CLI_EARLY=0`), side by side. Times are from the
// benchmark's call to the moment it sees the effect (a status query every 25 ms, or a watch event), so each
// includes up to ~25 ms of observation delay.
//
// The crash loop is written into the pod's status the way the kubelet reports one (waiting CrashLoopBackOff, the
// last exit code, Ready False): KWOK's stages only crash pods from their start, and a real kubelet is not here.
//
//   npm run bench:reactions -- [--trials 20] [--models 8]
//
// Simulated: KWOK pods, the engine stand-in. Real: Temporal, the API server, the controllers, the worker.
import type { KubernetesObject, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pvcName } from '../activities/builders/index.js';
import { deleteModel } from '../client/delete-model.js';
import { getModelStatus } from '../client/model-status.js';
import { serveModel } from '../client/serve-model.js';
import { updateModel } from '../client/update-model.js';
import type { ModelRef, ModelStatus } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  countingProxy,
  createNamespace,
  deleteNamespace,
  ensureGpuNodes,
  deleteModels,
  instantModel,
  localEnv,
  machine,
  percentile,
  removeGpuNodes,
  repoRoot,
  startWorker,
  temporalClient,
  uniqueName,
} from './lib.js';

const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '20' },
    models: { type: 'string', default: '8' },
    'pvc-trials': { type: 'string', default: '3' },
  },
});
const trials = Number(values.trials);
const kc = adminKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const client = await temporalClient();
const cluster = uniqueName('react');
const namespace = cluster;
const proxy = await countingProxy(kc);
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

const extraNodes = await ensureGpuNodes(kc, Number(values.models));
await createNamespace(kc, namespace);
const worker = await startWorker(cluster, proxy.kubeconfig);

/** Every watch event in the namespace, with the moment it arrived. */
const seen: { at: number; type: string; kind: string; obj: KubernetesObject }[] = [];
const watches = await Promise.all(
  [
    ['/api/v1', 'services', 'Service'],
    ['/apis/apps/v1', 'deployments', 'Deployment'],
  ].map(([base, plural, kind]) =>
    new Watch(kc).watch(
      `${base}/namespaces/${namespace}/${plural}`,
      {},
      (type: string, obj: KubernetesObject) => seen.push({ at: performance.now(), type, kind: kind!, obj }),
      () => undefined,
    ),
  ),
);

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const statusOf = (ref: ModelRef): Promise<ModelStatus> => getModelStatus(client, ref);
const ready = (ref: ModelRef) =>
  until(`${ref.name} Ready`, async () => ((await statusOf(ref)).phase === 'Ready' ? true : undefined));

/** Deletes an object and records how long until the benchmark's watch sees one of that name ADDED again. */
async function deletedUntilBack(kind: string, name: string, remove: () => Promise<unknown>): Promise<void> {
  const t0 = performance.now();
  const mark = seen.length;
  await remove();
  const back = await until(`the ${kind} back`, async () =>
    seen.slice(mark).find((e) => e.kind === kind && e.type === 'ADDED' && e.obj.metadata?.name === name),
  );
  record(`${kind} deleted → re-created`, back.at - t0);
}

/**
 * Who sends a `ferry` process's update, taking turns: the CLI's prelude before the Temporal SDK has loaded (as people
 * run it, client/early-update.ts), or the SDK once it has (`FERRY_CLI_EARLY=0`, as before), side by side in one run.
 */
const LOADS = [
  { label: 'cli', env: {} },
  { label: 'cli, sent by the SDK', env: { FERRY_CLI_EARLY: '0' } },
] as const;

/**
 * Who deletes, taking turns: a `ferry delete` process as people run it, the library, a `ferry delete` process whose
 * update the SDK sends (the CLI's path first, so that a one-trial run, the suite's slice, times it).
 */
const DELETES = [LOADS[0], 'library', LOADS[1]] as const;

/** Runs `ferry <args>` (the compiled CLI) against the local stack's Temporal; resolves with its exit code. */
function ferry(args: string[], env: Record<string, string> = {}): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(repoRoot, 'bin/ferry.js'), ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: localEnv().TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: 'default', ...env },
      stdio: 'ignore',
    });
    child.on('exit', resolve);
  });
}
const docs = mkdtempSync(join(tmpdir(), 'ferry-react-'));

/** The pod's status as a kubelet writes it for a container that keeps crashing. */
function crashLooping(pod: V1Pod): object {
  const name = pod.spec!.containers[0]!.name;
  return {
    status: {
      conditions: [
        { type: 'Ready', status: 'False', reason: 'ContainersNotReady' },
        { type: 'ContainersReady', status: 'False', reason: 'ContainersNotReady' },
      ],
      containerStatuses: [
        {
          name,
          image: pod.spec!.containers[0]!.image,
          imageID: '',
          ready: false,
          started: false,
          restartCount: 1,
          lastState: { terminated: { exitCode: 1, reason: 'Error' } },
          state: {
            waiting: { reason: 'CrashLoopBackOff', message: `back-off 10s restarting failed container=${name}` },
          },
        },
      ],
    },
  };
}

/** Whether the benchmark's watch saw, since `mark`, the Deployment's args change to `arg`. */
const patchedWith = (mark: number, arg: string) =>
  seen
    .slice(mark)
    .some(
      (e) =>
        e.kind === 'Deployment' &&
        e.type === 'MODIFIED' &&
        ((e.obj as V1Deployment).spec?.template.spec?.containers[0]?.args ?? []).includes(arg),
    );

/** Whether the benchmark's watch saw, since `mark`, the model's Deployment deleted or being deleted. */
const deploymentGoing = (mark: number, name: string) =>
  seen
    .slice(mark)
    .some(
      (e) =>
        e.kind === 'Deployment' &&
        e.obj.metadata?.name === name &&
        (e.type === 'DELETED' || !!e.obj.metadata?.deletionTimestamp),
    );

const samples: Record<string, number[]> = {};
const record = (name: string, ms: number) => (samples[name] ??= []).push(ms);

try {
  const refs = Array.from({ length: Number(values.models) }, (_, i) => ({ cluster, namespace, name: `r${i}` }));
  // Instant serves, one at a time: from the library call to Ready.
  for (const ref of refs) {
    const t0 = performance.now();
    await serveModel(client, instantModel(ref.name, namespace, cluster), { wait: true });
    record('serve → Ready (instant simulated stages)', performance.now() - t0);
  }

  // One command first, so Node's compile cache is written (the first run of a build writes it; bench:cli times it): a delete of a model that does not exist loads the prelude and the commands (exit 3).
  if ((await ferry(['delete', 'absent', '-n', namespace, '--cluster', cluster])) !== 3) {
    throw new Error('ferry delete of an absent model did not exit 3');
  }

  for (let i = 0; i < trials; i++) {
    const ref = refs[i % refs.length]!;
    await ready(ref);

    // An engine pod deleted → Degraded.
    const pods = await core.listNamespacedPod({ namespace, labelSelector: `ferry.dev/model=${ref.name}` });
    const pod = pods.items.find((p: V1Pod) => p.metadata?.labels?.['app.kubernetes.io/component'] === 'engine');
    const t0 = performance.now();
    await core.deleteNamespacedPod({ name: pod!.metadata!.name!, namespace, gracePeriodSeconds: 0 });
    await until('Degraded', async () => ((await statusOf(ref)).phase === 'Degraded' ? true : undefined));
    record('pod deleted → Degraded', performance.now() - t0);
    await ready(ref);

    // The engine reported crash-looping → Degraded; deleting that pod lets a fresh one make it Ready again.
    const again = await core.listNamespacedPod({ namespace, labelSelector: `ferry.dev/model=${ref.name}` });
    const live = again.items.find(
      (p: V1Pod) => p.metadata?.labels?.['app.kubernetes.io/component'] === 'engine' && !p.metadata.deletionTimestamp,
    )!;
    const t1 = performance.now();
    await core.patchNamespacedPodStatus(
      { name: live.metadata!.name!, namespace, body: crashLooping(live) },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    await until('Degraded', async () => ((await statusOf(ref)).phase === 'Degraded' ? true : undefined));
    record('engine crash-looping → Degraded', performance.now() - t1);
    await core.deleteNamespacedPod({ name: live.metadata!.name!, namespace, gracePeriodSeconds: 0 });
    await ready(ref);

    // The Service, then the Deployment, deleted → back.
    await deletedUntilBack('Service', ref.name, () => core.deleteNamespacedService({ name: ref.name, namespace }));
    await ready(ref);
    await deletedUntilBack('Deployment', ref.name, () =>
      apps.deleteNamespacedDeployment({ name: ref.name, namespace }),
    );
    await ready(ref);

    // An update (engine args) → the Deployment's spec patched.
    const doc = instantModel(ref.name, namespace, cluster) as ReturnType<typeof instantModel> & {
      spec: { engine: { args?: string[] } };
    };
    doc.spec.engine.args = [`--max-model-len=${4096 + i}`];
    const mark3 = seen.length;
    const sent = performance.now();
    await updateModel(client, doc);
    await until('the Deployment patched', async () =>
      patchedWith(mark3, `--max-model-len=${4096 + i}`) ? true : undefined,
    );
    record('update call → Deployment patched', performance.now() - sent);
    await ready(ref);

    // The same from a `ferry update` process.
    doc.spec.engine.args = [`--max-model-len=${8192 + i}`];
    const file = join(docs, `${ref.name}.json`);
    writeFileSync(file, JSON.stringify(doc));
    const load = LOADS[i % LOADS.length]!;
    const mark4 = seen.length;
    const spawned = performance.now();
    const exited = ferry(['update', '-f', file], load.env).then((code) => ({ code, at: performance.now() }));
    await until('the Deployment patched', async () =>
      patchedWith(mark4, `--max-model-len=${8192 + i}`) ? true : undefined,
    );
    record(`ferry update (process start, ${load.label}) → Deployment patched`, performance.now() - spawned);
    const exit = await exited;
    if (exit.code !== 0) throw new Error(`ferry update exited non-zero for ${ref.name}`);
    record(`ferry update (${load.label}): the whole command, start to exit`, exit.at - spawned);
    await ready(ref);

    // A delete → the Deployment going (its DELETED event, or a deletionTimestamp): by a `ferry delete` process (its
    // update sent early, then by the SDK) and by the library call, in turn. The model is served again for the next
    // trial once the teardown is done.
    const deleteBy = DELETES[i % DELETES.length]!;
    const mark5 = seen.length;
    const t5 = performance.now();
    const deleting =
      deleteBy === 'library'
        ? deleteModel(client, ref).then(() => ({ code: 0, at: performance.now() }))
        : ferry(['delete', ref.name, '-n', namespace, '--cluster', cluster], deleteBy.env).then((code) => ({
            code,
            at: performance.now(),
          }));
    await until('the Deployment going', async () => (deploymentGoing(mark5, ref.name) ? true : undefined));
    record(
      deleteBy === 'library'
        ? 'delete call → Deployment deleted'
        : `ferry delete (process start, ${deleteBy.label}) → Deployment deleted`,
      performance.now() - t5,
    );
    const deleted = await deleting;
    if (deleted.code !== 0) throw new Error(`ferry delete exited non-zero for ${ref.name}`);
    if (deleteBy !== 'library') {
      record(`ferry delete (${deleteBy.label}): the whole command, start to exit`, deleted.at - t5);
    }
    await deleteModel(client, ref, { wait: true, timeoutMs: 120_000 });
    await serveModel(client, instantModel(ref.name, namespace, cluster), { wait: true });
    log(`trial ${i + 1}/${trials} done`);
  }

  // A weights PVC deleted → Degraded, → Ready on a new volume (slow: the whole sequence runs again).
  for (let i = 0; i < Number(values['pvc-trials']); i++) {
    const ref = refs[i % refs.length]!;
    await ready(ref);
    const t0 = performance.now();
    await core.deleteNamespacedPersistentVolumeClaim({ name: pvcName(ref.name), namespace });
    await until('not Ready', async () => ((await statusOf(ref)).phase !== 'Ready' ? true : undefined));
    record('PVC deleted → not Ready (Degraded, then rebuilding)', performance.now() - t0);
    await ready(ref);
    record('PVC deleted → Ready again on a new volume', performance.now() - t0);
  }

  const summary = Object.fromEntries(
    Object.entries(samples).map(([name, ms]) => [
      name,
      {
        n: ms.length,
        p50Ms: Math.round(percentile(ms, 50)),
        p99Ms: Math.round(percentile(ms, 99)),
        maxMs: Math.round(Math.max(...ms)),
      },
    ]),
  );
  console.log(JSON.stringify({ machine: machine(), config: { trials, models: refs.length }, summary }, null, 2));
} catch (err) {
  process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  for (const w of watches) w.abort();
  await deleteModels(
    client,
    Array.from({ length: Number(values.models) }, (_, i) => ({ cluster, namespace, name: `r${i}` })),
  );
  await deleteNamespace(kc, namespace);
  await removeGpuNodes(kc, extraNodes);
  await worker.stop();
  await proxy.close();
  await client.connection.close();
}
