// Upgrading the worker under N Ready models with Worker Versioning (docs/upgrading.md): version v1 serves them, v2
// starts beside it and is made current, and each model's run moves to v2 by continue-as-new. Prints how many engine
// pods the upgrade replaced (the bar: 0), the history events each model's move cost (the bar: ≤ 10; the old run's
// events from the switch on, and the new run's), and how long until every run was on v2.
//
//   npm run bench:upgrade -- [--models 50] [--parallel 10] [--deadline 600]
//
// Progress goes to stderr every 20 s (which models are not Ready yet, and why; where each run is pinned). Past
// --deadline seconds, or on Ctrl-C or SIGTERM, it stops, prints what it saw and the workers' logs, and cleans up.
//
// Real: Temporal's dev server (Worker Deployments), the API server and controllers, both worker processes (the
// compiled worker, dist/). Simulated: KWOK pods and the engine stand-in.
import { parseArgs } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import proto from '@temporalio/proto';
import { workflowIdFor } from '../workflows/contract/index.js';
import { getModelStatus } from '../client/model-status.js';
import { serveModel } from '../client/serve-model.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteModels,
  deleteNamespace,
  ensureGpuNodes,
  inParallel,
  instantModel,
  localEnv,
  machine,
  removeGpuNodes,
  sleep,
  startWorker,
  temporalClient,
  uniqueName,
  type BenchWorker,
} from './lib.js';

const { values } = parseArgs({
  options: {
    models: { type: 'string', default: '50' },
    parallel: { type: 'string', default: '10' },
    deadline: { type: 'string', default: '1800' },
  },
});
const models = Number(values.models);
const deadlineMs = 1000 * Number(values.deadline);

const kc = adminKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const client = await temporalClient();
const cluster = uniqueName('upg');
const namespace = cluster;
const deploymentName = `ferry-${cluster}`;
const names = Array.from({ length: models }, (_, i) => `m${String(i).padStart(3, '0')}`);
const handles = names.map((name) => client.workflow.getHandle(workflowIdFor({ cluster, namespace, name })));
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);
// At INFO: the keeper's lines (made current, woke runs) are in the report of a run that stops early.
const version = (buildId: string) => ({
  FERRY_WORKER_VERSIONING: 'on',
  FERRY_BUILD_ID: buildId,
  FERRY_LOG_LEVEL: 'INFO',
});

const extraNodes = await ensureGpuNodes(kc, models);
await createNamespace(kc, namespace);
const workers: BenchWorker[] = [];

/** The build ID each model's current run is pinned to. */
async function pinnedVersions(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  await inParallel(handles, 10, async (handle) => {
    const described = await handle.describe();
    const buildId = described.raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? 'unversioned';
    counts.set(buildId, (counts.get(buildId) ?? 0) + 1);
  });
  return counts;
}

/**
 * Waits until no run has an activity in flight and no history grows between two looks a second apart: a model is
 * Ready before its run finishes the steps that follow (on a loaded machine an activity can still be running), and
 * the move's count is of the move alone, not of a serve's tail that completes after the switch.
 */
async function quiet(timeoutMs = 120_000): Promise<void> {
  const lengths = async () =>
    Promise.all(
      handles.map(async (h) => {
        const raw = (await h.describe()).raw;
        return (raw.pendingActivities?.length ?? 0) > 0 ? 'busy' : String(raw.workflowExecutionInfo?.historyLength);
      }),
    );
  const started = Date.now();
  let before = await lengths();
  for (;;) {
    await sleep(1_000);
    const now = await lengths();
    if (now.every((n, i) => n !== 'busy' && n === before[i])) return;
    if (Date.now() - started > timeoutMs) throw new Error(`runs still busy after ${timeoutMs / 1000} s: ${now.join()}`);
    before = now;
  }
}

async function engineUids(): Promise<Set<string>> {
  const pods = await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=engine' });
  return new Set(pods.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.metadata!.uid!));
}

/** What the benchmark is waiting for, for the progress lines. */
let stage: 'v1' | 'serving' | 'v2' | 'moving' | 'measuring' = 'v1';
const readyModels = new Set<string>();

/** One progress line: the models not Ready yet and why, or where each run is pinned, and the deployment's routing. */
async function progress(): Promise<string> {
  const deployment = await client.workflowService
    .describeWorkerDeployment({ namespace: 'default', deploymentName })
    .then((d) => {
      const info = d.workerDeploymentInfo;
      const versions = (info?.versionSummaries ?? []).map((v) => v.deploymentVersion?.buildId).join(',');
      return `deployment current=${info?.routingConfig?.currentDeploymentVersion?.buildId ?? 'none'} versions=${versions} routing=${proto.temporal.api.enums.v1.RoutingConfigUpdateState[info?.routingConfigUpdateState ?? 0]}`;
    })
    .catch((err: Error) => `deployment: ${err.message}`);
  if (stage === 'serving') {
    const waiting = await Promise.all(
      names
        .filter((name) => !readyModels.has(name))
        .slice(0, 5)
        .map(async (name) => {
          const status = await getModelStatus(client, { cluster, namespace, name }).catch((err: Error) => err);
          if (status instanceof Error) return `${name}: ${status.message}`;
          const step = status.timeline.at(-1);
          const why =
            status.waiting?.message ?? status.lastError?.message ?? (step && `${step.step} ${step.detail ?? ''}`);
          return `${name} ${status.phase} ${why ?? ''}`.trim();
        }),
    );
    return `${readyModels.size}/${models} Ready; ${waiting.join('; ')}; ${deployment}`;
  }
  if (stage === 'moving') return `pinned ${JSON.stringify([...(await pinnedVersions())])}; ${deployment}`;
  return `${stage}; ${deployment}`;
}

let cleaned: Promise<void> | undefined;
/** Deletes the models (their GPUs!), the namespace and nodes, and stops the workers; once, also on Ctrl-C. */
function cleanUp(): Promise<void> {
  cleaned ??= (async () => {
    log('deleting the models');
    await deleteModels(
      client,
      names.map((name) => ({ cluster, namespace, name })),
    );
    await deleteNamespace(kc, namespace);
    await removeGpuNodes(kc, extraNodes);
    for (const worker of workers) await worker.stop();
    await client.connection.close();
  })();
  return cleaned;
}

/** Why it stopped early: what it was waiting for, and the end of each worker's log. */
async function report(reason: string): Promise<void> {
  log(`${reason}; ${await progress().catch((err: Error) => err.message)}`);
  for (const [i, worker] of workers.entries()) {
    process.stderr.write(`--- the end of worker v${i + 1}'s log\n${worker.log().slice(-4000)}\n`);
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void report(signal)
      .then(cleanUp)
      .finally(() => process.exit(130));
  });
}

async function run(): Promise<Record<string, unknown>> {
  workers.push(await startWorker(cluster, localEnv().KUBECONFIG, version('bench-v1')));
  // v1's keeper makes it current: the deployment had none.
  for (let tries = 0; ; tries++) {
    const described = await client.workflowService
      .describeWorkerDeployment({ namespace: 'default', deploymentName })
      .catch(() => undefined);
    if (described?.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId === 'bench-v1') break;
    if (tries > 120) throw new Error('v1 was not made current within 60 s');
    await sleep(500);
  }
  stage = 'serving';
  const setupStart = Date.now();
  await inParallel(names, Number(values.parallel), async (name) => {
    await serveModel(client, instantModel(name, namespace, cluster), { wait: true, timeoutMs: 10 * 60_000 });
    readyModels.add(name);
    if (readyModels.size % 25 === 0 || readyModels.size === models) log(`${readyModels.size}/${models} Ready on v1`);
  });
  log(`all ${models} Ready in ${Math.round((Date.now() - setupStart) / 1000)} s; waiting until every run is quiet`);
  await quiet();
  const podsBefore = await engineUids();
  const firstRuns = new Map(
    await Promise.all(handles.map(async (h) => [h.workflowId, (await h.describe()).runId] as const)),
  );

  stage = 'v2';
  workers.push(await startWorker(cluster, localEnv().KUBECONFIG, version('bench-v2')));
  const switchedAt = Date.now();
  for (let tries = 0; ; tries++) {
    const made = await client.workflowService
      .setWorkerDeploymentCurrentVersion({
        namespace: 'default',
        deploymentName,
        buildId: 'bench-v2',
        identity: 'bench',
      })
      .then(() => true)
      .catch(() => false);
    if (made) break;
    if (tries > 120) throw new Error('v2 could not be made current within 60 s');
    await sleep(500);
  }
  log('v2 is current; waiting for every run to move');
  stage = 'moving';
  let pinned = await pinnedVersions();
  while ((pinned.get('bench-v2') ?? 0) < models) {
    if (Date.now() - switchedAt > 10 * 60_000)
      throw new Error(`not every run moved in 10 min: ${JSON.stringify([...pinned])}`);
    await sleep(2_000);
    pinned = await pinnedVersions();
  }
  const movedInSeconds = Math.round((Date.now() - switchedAt) / 1000);
  log(`every run on v2 in ${movedInSeconds} s; stopping v1`);
  stage = 'measuring';
  await workers[0]!.stop();

  const podsAfter = await engineUids();
  const replaced = [...podsBefore].filter((uid) => !podsAfter.has(uid)).length;
  // History events of each model's move: the first run's from the switch on, and every run after it.
  // The busiest model's events by type, so that a count over the usual says what the extra events were.
  const perModel: { events: number; types: Record<string, number> }[] = [];
  await inParallel(handles, 10, async (handle) => {
    const types: Record<string, number> = {};
    let events = 0;
    for await (const run of client.workflow.list({ query: `WorkflowId = '${handle.workflowId}'` })) {
      const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
      for (const e of history.events ?? []) {
        const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
        if (run.runId !== firstRuns.get(handle.workflowId) || at >= switchedAt) {
          events++;
          const type = proto.temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType);
          types[type] = (types[type] ?? 0) + 1;
        }
      }
    }
    perModel.push({ events, types });
  });
  perModel.sort((a, b) => a.events - b.events);
  return {
    machine: machine(),
    config: { models },
    enginePodsBefore: podsBefore.size,
    enginePodsReplaced: replaced,
    historyEventsPerModel: {
      min: perModel[0]?.events,
      median: perModel[Math.floor(perModel.length / 2)]?.events,
      max: perModel.at(-1)?.events,
    },
    busiestModelEvents: perModel.at(-1)?.types,
    secondsUntilEveryRunMoved: movedInSeconds,
    note: 'a run moves at its next workflow task: the new version wakes runs pinned to older ones every 30 s, once the server reports the switch propagated and 10 s have passed',
  };
}

const ticker = setInterval(() => {
  void progress().then(log, (err: Error) => log(`progress: ${err.message}`));
}, 20_000);
let deadlineTimer: NodeJS.Timeout | undefined;
const pastDeadline = new Promise<never>((_, reject) => {
  deadlineTimer = setTimeout(() => reject(new Error(`not done within --deadline ${values.deadline} s`)), deadlineMs);
});
try {
  const result = await Promise.race([run(), pastDeadline]);
  console.log(JSON.stringify(result, null, 2));
} catch (err) {
  await report(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
} finally {
  clearInterval(ticker);
  clearTimeout(deadlineTimer);
  await cleanUp();
}
// A run() abandoned at the deadline may still hold a request open.
process.exit();
