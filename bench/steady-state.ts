// What N Ready models cost when nothing happens to them: API requests per model per second (counted by a proxy in
// front of the API server, so only the worker's own requests count), history events per model-hour and Temporal
// actions per model-day (from each model's history over the window), the worker's CPU and RSS.
//
//   npm run bench:steady -- [--models 300] [--window 31m] [--watch on|off] [--parallel 10] [--keep] [--hold-headers]
//                           [--heap-snapshot DIR] [--server-baseline 2m]
//
// The worker's RSS is sampled every second: its peak while the models start (the ramp) and over the window, and at
// the end its memory by kind (ferry_worker_memory_bytes). --heap-snapshot writes a V8 heap snapshot of the worker at
// the end of the window into DIR (Chrome's DevTools opens it), to see where the memory is.
// --hold-headers: the counting proxy sends a response's headers only with its first body byte, as some proxies do.
// FERRY_WATCH_RENEW (passed to the worker) renews its watches sooner than every 30–60 min: a soak compressed.
//
// The window should span one safety-net interval (6 h by default; --safety-net 2m compresses it, and the result
// gives what each look cost and what that makes a day at the default) so that every model's look falls in it; a
// shorter window (CI runs `--models 5 --window 40s`) measures wakes only and says so.
// The Temporal server's side (bench/temporal-load.ts): its requests and persistence writes per model started and per
// Ready model-hour (less the idle server's, measured for --server-baseline before any model starts), and on Temporal's
// server with PostgreSQL (`npm run local:up -- --temporal postgres`) the database's transactions, rows and WAL.
// Everything is simulated except Temporal, the API server and the controllers: KWOK pods, the engine stand-in.
import { mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration, workflowIdFor } from '../workflows/contract/index.js';
import { serveModel } from '../client/serve-model.js';
import {
  adminKubeConfig,
  countingProxy,
  createNamespace,
  deleteModels,
  deleteNamespace,
  ensureGpuNodes,
  freePort,
  inParallel,
  instantModel,
  machine,
  removeGpuNodes,
  repoRoot,
  sleep,
  startWorker,
  temporalClient,
  uniqueName,
} from './lib.js';
import { sampleServer, serverDelta, serverReport, temporalServer, type ServerSample } from './temporal-load.js';

/** The workflow's default safety net (workflows/activity-options.ts). */
const DEFAULT_SAFETY_NET_MS = 6 * 3_600_000;

/** Temporal's EventType numbers (temporal.api.enums.v1.EventType) of the events that are billed actions. */
const EVENT = { ACTIVITY_TASK_SCHEDULED: 10, TIMER_STARTED: 17, WORKFLOW_EXECUTION_SIGNALED: 26 } as const;

const { values } = parseArgs({
  options: {
    models: { type: 'string', default: '300' },
    window: { type: 'string', default: '31m' },
    watch: { type: 'string', default: 'on' },
    parallel: { type: 'string', default: '10' },
    settle: { type: 'string', default: '30s' },
    keep: { type: 'boolean', default: false },
    'hold-headers': { type: 'boolean', default: false },
    'safety-net': { type: 'string' },
    'heap-snapshot': { type: 'string' },
    'server-baseline': { type: 'string', default: '2m' },
  },
});
const models = Number(values.models);
const windowMs = parseDuration(values.window);
const settleMs = parseDuration(values.settle);
/** The models' safety net: the workflow's default (6 h) unless --safety-net compresses it to measure its looks. */
const safetyNetMs = values['safety-net'] ? parseDuration(values['safety-net']) : DEFAULT_SAFETY_NET_MS;

const kc = adminKubeConfig();
const client = await temporalClient();
const cluster = uniqueName('bench');
const namespace = cluster;
const proxy = await countingProxy(kc, { holdHeaders: values['hold-headers'] });
const names = Array.from({ length: models }, (_, i) => `m${String(i).padStart(3, '0')}`);
const extraNodes = await ensureGpuNodes(kc, models);
await createNamespace(kc, namespace);
const metricsPort = await freePort();
const worker = await startWorker(cluster, proxy.kubeconfig, {
  FERRY_WATCH: values.watch,
  FERRY_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
  ...(values['heap-snapshot']
    ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2`.trim() }
    : {}),
});
/** The worker's RSS, sampled every second: the peak of the ramp and of the window. */
const peaks = { ramp: 0, window: 0 };
/** The worker's CPU, in % of a core, over each 5-s step: the busiest step of the ramp and of the window. */
const cpuPeaks = { ramp: 0, window: 0 };
let stage: keyof typeof peaks = 'ramp';
let cpuStep: { cpuSeconds: number; at: number } | undefined;
const sampler = setInterval(() => {
  try {
    const usage = worker.usage();
    peaks[stage] = Math.max(peaks[stage], usage.rssBytes);
    const now = Date.now();
    if (!cpuStep) cpuStep = { cpuSeconds: usage.cpuSeconds, at: now };
    else if (now - cpuStep.at >= 5_000) {
      const percent = ((usage.cpuSeconds - cpuStep.cpuSeconds) / ((now - cpuStep.at) / 1000)) * 100;
      cpuPeaks[stage] = Math.max(cpuPeaks[stage], percent);
      cpuStep = { cpuSeconds: usage.cpuSeconds, at: now };
    }
  } catch {
    // the worker has exited; its end is reported below
  }
}, 1_000);
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

/** The Temporal server's metrics (and database, on PostgreSQL): sampled around the idle baseline, ramp and window. */
const server = temporalServer();
const serverAt: Record<'idle' | 'ramp' | 'ready', ServerSample | undefined> = {
  idle: undefined,
  ramp: undefined,
  ready: undefined,
};

try {
  if (server) {
    // The idle server, with the worker polling and no model: what the window's load is measured against.
    const baselineMs = parseDuration(values['server-baseline']);
    log(`the Temporal server idle for ${values['server-baseline']}`);
    serverAt.idle = await sampleServer(server);
    await sleep(baselineMs);
    serverAt.ramp = await sampleServer(server);
  }
  const setupStart = Date.now();
  const rampUsage = worker.usage();
  let ready = 0;
  await inParallel(names, Number(values.parallel), async (name) => {
    await serveModel(client, instantModel(name, namespace, cluster), {
      wait: true,
      timeoutMs: 10 * 60_000,
      ...(values['safety-net'] ? { workflowOptions: { safetyNetIntervalMs: safetyNetMs } } : {}),
    });
    if (++ready % 25 === 0 || ready === models) log(`${ready}/${models} Ready`);
  });
  const readyUsage = worker.usage();
  const rampSeconds = (Date.now() - setupStart) / 1000;
  if (server) serverAt.ready = await sampleServer(server);
  log(`all ${models} Ready in ${Math.round((Date.now() - setupStart) / 1000)} s; settling ${values.settle}`);
  await sleep(settleMs);

  const handles = names.map((name) => client.workflow.getHandle(workflowIdFor({ cluster, namespace, name })));
  stage = 'window';
  cpuStep = undefined;
  const serverBefore = server ? await sampleServer(server) : undefined;
  const before = { api: proxy.counts(), usage: worker.usage(), at: Date.now() };
  log(`window of ${values.window} starts`);
  await sleep(windowMs);
  const after = { api: proxy.counts(), usage: worker.usage(), at: Date.now() };
  const serverAfter = server ? await sampleServer(server) : undefined;
  const seconds = (after.at - before.at) / 1000;
  const snapshot = values['heap-snapshot'] ? await heapSnapshot(values['heap-snapshot']) : undefined;

  // History over the window, per model: every event, and the ones Temporal bills as actions.
  let events = 0;
  const actions = { timers: 0, activities: 0, signals: 0 };
  await inParallel(handles, 10, async (handle) => {
    const history = await handle.fetchHistory();
    for (const e of history.events ?? []) {
      const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
      if (at < before.at || at > after.at) continue;
      events++;
      const type = Number(e.eventType);
      if (type === EVENT.TIMER_STARTED) actions.timers++;
      if (type === EVENT.ACTIVITY_TASK_SCHEDULED) actions.activities++;
      if (type === EVENT.WORKFLOW_EXECUTION_SIGNALED) actions.signals++;
    }
  });
  const apiRequests = after.api.total - before.api.total;
  const byKind = Object.fromEntries(
    Object.entries(after.api.byKind)
      .map(([k, v]) => [k, v - (before.api.byKind[k] ?? 0)] as const)
      .filter(([, v]) => v > 0),
  );
  const modelHours = (models * seconds) / 3600;
  const allActions = actions.timers + actions.activities + actions.signals;
  const result = {
    machine: machine(),
    config: {
      models,
      window: values.window,
      watch: values.watch,
      safetyNet: values['safety-net'] ?? '6h (default)',
      watchRenew: process.env.FERRY_WATCH_RENEW ?? '30m (default)',
      holdHeaders: values['hold-headers'],
    },
    windowSeconds: Math.round(seconds),
    apiRequests,
    apiRequestsByKind: byKind,
    apiRequestsPerModelPerSecond: apiRequests / models / seconds,
    historyEvents: events,
    historyEventsPerModelHour: events / modelHours,
    actions,
    actionsPerModelDay: (allActions / modelHours) * 24,
    // Ferry's load on the Temporal server (bench/temporal-load.ts): per model started and per Ready model-hour.
    temporalServer:
      server && serverAt.idle && serverAt.ramp && serverAt.ready && serverBefore && serverAfter
        ? serverReport(
            server.postgres ? "Temporal's server on PostgreSQL" : 'the dev server (SQLite)',
            models,
            serverDelta(serverAt.idle, serverAt.ramp),
            serverDelta(serverAt.ramp, serverAt.ready),
            serverDelta(serverBefore, serverAfter),
            values['safety-net']
              ? { looks: actions.timers, defaultLooksPerHour: 3_600_000 / DEFAULT_SAFETY_NET_MS }
              : undefined,
          )
        : 'the stack names no Temporal metrics (TEMPORAL_METRICS_URL): restart it with npm run local:up',
    workerCpuPercentOfACore: ((after.usage.cpuSeconds - before.usage.cpuSeconds) / seconds) * 100,
    // The ramp: every model started (`--parallel` at a time) until the last is Ready.
    workerCpuRamp: {
      seconds: Math.round(rampSeconds),
      averagePercentOfACore: ((readyUsage.cpuSeconds - rampUsage.cpuSeconds) / rampSeconds) * 100,
      busiest5sPercentOfACore: cpuPeaks.ramp,
      cpuSecondsPerModelStarted: (readyUsage.cpuSeconds - rampUsage.cpuSeconds) / models,
    },
    workerCpuBusiest5sInWindowPercentOfACore: cpuPeaks.window,
    workerRssMiB: Math.round(after.usage.rssBytes / 2 ** 20),
    workerRssPeakMiB: { ramp: Math.round(peaks.ramp / 2 ** 20), window: Math.round(peaks.window / 2 ** 20) },
    // Sampled by the worker every 30 s: the main thread's V8 heap, external, and the rest (the workflow thread's heap
    // and native memory).
    workerMemoryMiB: await memoryByKind(metricsPort),
    ...(snapshot ? { heapSnapshot: snapshot } : {}),
    watchFailures: watchFailures(worker.log()),
    // From the worker's metrics (its gauges are brought up to date every 30 s): every watch's ends over the whole run.
    watchEnds: await watchEnds(metricsPort),
    // Each look costs the same whatever its interval: at the default, a quiet model has 24 h / 6 h of them a day.
    ...perLook(actions, events, models, seconds),
    note:
      windowMs < safetyNetMs
        ? `the window is shorter than the safety net (${values['safety-net'] ?? '6h'}): its looks are not in it (wakes only)`
        : 'the window spans the safety net: each model had its safety-net look in it',
  };
  console.log(JSON.stringify(result, null, 2));
  if (result.watchFailures.total > 0)
    log(`watch failures, from the worker's log:\n${result.watchFailures.lines.join('\n')}`);
} catch (err) {
  process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  if (!values.keep) {
    log('deleting the models');
    await deleteModels(
      client,
      names.map((name) => ({ cluster, namespace, name })),
    );
    await deleteNamespace(kc, namespace);
    await removeGpuNodes(kc, extraNodes);
  }
  clearInterval(sampler);
  await worker.stop();
  await proxy.close();
  await client.connection.close();
}

/** The worker's `watch failed` warnings (JSON lines) over the whole run: how many, by kind and error, the first few. */
function watchFailures(text: string): { total: number; byKindAndError: Record<string, number>; lines: string[] } {
  const lines = text.split('\n').filter((l) => l.includes('watch failed') || l.includes('watch stalled'));
  const byKindAndError: Record<string, number> = {};
  for (const line of lines) {
    let key = line.slice(0, 200);
    try {
      const entry = JSON.parse(line) as { meta?: { kind?: string; error?: string }; kind?: string; error?: string };
      const fields = entry.meta ?? entry;
      key = `${fields.kind ?? '?'}: ${fields.error ?? 'stalled'}`;
    } catch {
      // not a JSON line: counted under its own text
    }
    byKindAndError[key] = (byKindAndError[key] ?? 0) + 1;
  }
  return { total: lines.length, byKindAndError, lines: lines.slice(0, 10) };
}

/** `ferry_watch_restarts_total` summed by `how` (renewed, cut, stalled, failed), and the watches counted. */
async function watchEnds(port: number): Promise<{ watches: number; byHow: Record<string, number> } | string> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const byHow: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m = /^ferry_watch_restarts_total\{.*how="(\w+)".*\} (\S+)$/.exec(line);
      if (m) byHow[m[1]!] = (byHow[m[1]!] ?? 0) + Number(m[2]);
    }
    const watches = text.split('\n').filter((l) => l.startsWith('ferry_watch_age_seconds{')).length;
    return { watches, byHow };
  } catch (err) {
    return `could not read the worker's metrics: ${String(err)}`;
  }
}

/**
 * With the safety net compressed, what one look cost (timer and activity: the model's only actions while quiet) and
 * what a quiet model pays a day and an hour at the default interval.
 */
function perLook(
  actions: { timers: number; activities: number; signals: number },
  events: number,
  models: number,
  seconds: number,
): Record<string, number> {
  if (!values['safety-net'] || actions.timers === 0) return {};
  const looks = actions.timers;
  const perDay = (24 * 3_600_000) / DEFAULT_SAFETY_NET_MS;
  const actionsPerLook = (actions.timers + actions.activities) / looks;
  const eventsPerLook = events / looks;
  return {
    looksPerModel: looks / models,
    looksPerModelExpected: (seconds * 1000) / safetyNetMs,
    actionsPerLook,
    eventsPerLook,
    atDefaultSafetyNetActionsPerModelDay: actionsPerLook * perDay,
    atDefaultSafetyNetEventsPerModelHour: (eventsPerLook * perDay) / 24,
  };
}

/** `ferry_worker_memory_bytes` by kind, in MiB, and what of the RSS is neither the main heap nor external. */
async function memoryByKind(port: number): Promise<Record<string, number> | string> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const mib: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m = /^ferry_worker_memory_bytes\{.*kind="(\w+)".*\} (\S+)$/.exec(line);
      if (m) mib[m[1]!] = Math.round(Number(m[2]) / 2 ** 20);
    }
    if (mib.rss !== undefined && mib.heap_total !== undefined && mib.external !== undefined)
      mib.workflowThreadAndNative = mib.rss - mib.heap_total - mib.external;
    return mib;
  } catch (err) {
    return `could not read the worker's metrics: ${String(err)}`;
  }
}

/** Signals the worker to write a heap snapshot (Node writes it into its working directory) and moves it to `dir`. */
async function heapSnapshot(dir: string): Promise<string> {
  const cwd = repoRoot;
  const existing = new Set(readdirSync(cwd).filter((f) => f.endsWith('.heapsnapshot')));
  worker.child.kill('SIGUSR2');
  // Written when the whole file is there: its size stops growing.
  for (let size = -1, i = 0; i < 600; i++) {
    await sleep(1_000);
    const file = readdirSync(cwd).find((f) => f.endsWith('.heapsnapshot') && !existing.has(f));
    if (!file) continue;
    const now = statSync(join(cwd, file)).size;
    if (now > 0 && now === size) {
      mkdirSync(dir, { recursive: true });
      const to = resolve(dir, file);
      renameSync(join(cwd, file), to);
      return to;
    }
    size = now;
  }
  return 'the worker wrote no heap snapshot within 10 min';
}
