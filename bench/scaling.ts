// Autoscaling against the engine stand-in (docs/design/scaling.md): per round, a model with spec.scaling is served
// through Ferry (a worker of the benchmark's own, the real workflow), a steady load of --in-flight streamed
// completions is put on its first replica, and the benchmark times the scale-out (the decision, the Deployment's count,
// the new replicas ready), counts the model's history events while the load holds steady (what a Ready model under
// steady traffic costs on the users' Temporal), then stops the load and times the way back to minReplicas. Every
// request's answer is checked: none may fail while the count moves. Then, with --idle (the model's idleToZeroAfter,
// and a front), it waits for the model to go to zero (phase Idle) and times one streamed completion sent to the
// front at zero: its first token, and its end (--idle off skips this).
//
//   npm run bench:scaling -- [--rounds 3] [--in-flight 8] [--target 2] [--max 3] [--up 15s] [--down 1m]
//                            [--steady 5m] [--interval 5s] [--token-delay-ms 50] [--output-tokens 40] [--idle 5m]
//
// Simulated: KWOK pods and the engine (the stand-in, one per pod; its vllm:num_requests_running and _waiting are the
// real engine's names, checked by the conformance suite; it answers /health 0 s after its pod runs). Real: the
// Temporal server, the API server and controllers, the worker, its readings over HTTP, the decisions and the
// workflow, and the front (Debian's HAProxy with the configuration Ferry wrote, played by the local stack for the
// front's KWOK pods).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { deleteModel } from '../client/delete-model.js';
import { getModelStatus } from '../client/model-status.js';
import { serveModel } from '../client/serve-model.js';
import { parseDuration, workflowIdFor, type ModelRef } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteNamespace,
  instantModel,
  machine,
  localEnv,
  percentile,
  repoRoot,
  sleep,
  startWorker,
  streamOnce,
  temporalClient,
  uniqueName,
  wholeOption,
} from './lib.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'in-flight': { type: 'string', default: '8' },
    target: { type: 'string', default: '2' },
    max: { type: 'string', default: '3' },
    up: { type: 'string', default: '15s' },
    down: { type: 'string', default: '1m' },
    steady: { type: 'string', default: '5m' },
    interval: { type: 'string', default: '5s' },
    'token-delay-ms': { type: 'string', default: '50' },
    'output-tokens': { type: 'string', default: '40' },
    idle: { type: 'string', default: '5m' },
  },
});

const whole = wholeOption;
function ms(name: string, text: string): number {
  try {
    return parseDuration(text);
  } catch {
    process.stderr.write(`--${name} must be a duration like 30s, got ${JSON.stringify(text)}\n`);
    process.exit(2);
  }
}
const config = {
  rounds: whole('rounds', values.rounds),
  inFlight: whole('in-flight', values['in-flight']),
  target: whole('target', values.target),
  maxReplicas: whole('max', values.max, 2),
  scaleUpAfter: values.up,
  scaleDownAfter: values.down,
  steadyMs: ms('steady', values.steady),
  interval: values.interval,
  tokenDelayMs: whole('token-delay-ms', values['token-delay-ms']),
  outputTokens: whole('output-tokens', values['output-tokens']),
  idleToZeroAfter: values.idle === 'off' ? undefined : values.idle,
};
ms('up', config.scaleUpAfter);
ms('down', config.scaleDownAfter);
ms('interval', config.interval);
// The way back to minReplicas takes a little over two --down windows (a step at most halves): a shorter --idle would
// take the model to zero from above minReplicas, and the round would not see it back there.
if (
  config.idleToZeroAfter !== undefined &&
  ms('idle', config.idleToZeroAfter) <= 2 * ms('down', config.scaleDownAfter)
) {
  process.stderr.write(
    `--idle must be longer than twice --down (${config.scaleDownAfter}): the model would go to zero before it is back at minReplicas\n`,
  );
  process.exit(2);
}
/** What the load calls for, within the bounds. */
const wanted = Math.min(config.maxReplicas, Math.ceil(config.inFlight / config.target));

const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

const kc = adminKubeConfig();
const apps = kc.makeApiClient(AppsV1Api);
const core = kc.makeApiClient(CoreV1Api);
const client = await temporalClient();
const cluster = uniqueName('scaling');
const namespace = cluster;
await createNamespace(kc, namespace);
const worker = await startWorker(cluster, localEnv().KUBECONFIG, { FERRY_SCALING_INTERVAL: config.interval });

async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined | false>): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Keeps `inFlight` streamed completions running against `url` until `stop()`; counts answers and failures. */
function steadyLoad(url: string, inFlight: number) {
  let stopped = false;
  const counts = { answered: 0, failed: 0 };
  const lanes = Array.from({ length: inFlight }, async () => {
    while (!stopped) {
      const r = await streamOnce(url, config.outputTokens).catch(() => undefined);
      if (r?.status === 200 && r.done) counts.answered++;
      else counts.failed++;
    }
  });
  return {
    counts,
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
    },
  };
}

interface Round {
  /** From the first request to the decision recorded in status, to the Deployment's count, to those replicas ready. */
  decisionS: number;
  countS: number;
  readyS: number;
  decisions: string[];
  /** History events of the model's workflow while the load held steady at the scaled-out count. */
  steadyEvents: number;
  steadyEventsPerHour: number;
  /** From the load's end to the Deployment back at minReplicas. */
  scaleInS: number;
  answered: number;
  failed: number;
  /** With --idle: from the load's end to phase Idle, and one completion sent at zero through the front. */
  zero?: { idleAfterS: number; status: number; firstTokenS?: number; totalS: number; done: boolean };
}

async function round(n: number): Promise<Round> {
  const name = `r${n}`;
  const doc = instantModel(name, namespace, cluster, 0);
  const spec = doc.spec as Record<string, unknown>;
  spec.engine = {
    startupTimeout: '5m',
    env: [{ name: 'FERRY_SIM_TOKEN_DELAY_MS', value: String(config.tokenDelayMs) }],
  };
  spec.scaling = {
    minReplicas: 1,
    maxReplicas: config.maxReplicas,
    targetConcurrency: config.target,
    scaleUpAfter: config.scaleUpAfter,
    scaleDownAfter: config.scaleDownAfter,
    ...(config.idleToZeroAfter !== undefined ? { idleToZeroAfter: config.idleToZeroAfter } : {}),
  };
  if (config.idleToZeroAfter !== undefined) spec.front = {};
  const served = await serveModel(client, doc, { wait: true, timeoutMs: 5 * 60_000 });
  const ref: ModelRef = served.ref;
  try {
    const [pod] = (
      await core.listNamespacedPod({
        namespace,
        labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
      })
    ).items;
    const url = await until(
      "the first pod's stand-in",
      30_000,
      async () => endpoints()[`${namespace}/${name}/${pod!.metadata!.name!}`],
    );
    const started = Date.now();
    const load = steadyLoad(url, config.inFlight);
    const deployment = () => apps.readNamespacedDeployment({ name, namespace });
    const countAt = await until('the scaled-out count', 5 * 60_000, async () =>
      (await deployment()).spec?.replicas === wanted ? Date.now() : undefined,
    );
    const readyAt = await until('the scaled-out replicas ready', 5 * 60_000, async () =>
      (await deployment()).status?.readyReplicas === wanted ? Date.now() : undefined,
    );
    const out = await until('the decision in status', 60_000, async () => {
      const s = await getModelStatus(client, ref);
      return s.scaling?.replicas === wanted ? s : undefined;
    });
    const decisionS = (Date.parse(out.scaling!.lastDecision!.at) - started) / 1000;
    // Steady: a quiet moment for the watch's last wakes (the new pods becoming ready), then the window.
    await sleep(3_000);
    const handle = client.workflow.getHandle(workflowIdFor(ref));
    const before = (await handle.fetchHistory()).events?.length ?? 0;
    await sleep(config.steadyMs);
    const steadyEvents = ((await handle.fetchHistory()).events?.length ?? 0) - before;
    await load.stop();
    const stoppedAt = Date.now();
    await until('back at minReplicas', 10 * 60_000, async () => (await deployment()).spec?.replicas === 1);
    const scaleInS = (Date.now() - stoppedAt) / 1000;
    const back = await until('the last decision in status', 60_000, async () => {
      const s = await getModelStatus(client, ref);
      return s.scaling?.replicas === 1 ? s : undefined;
    });
    const zero = config.idleToZeroAfter === undefined ? undefined : await atZero(ref, name, stoppedAt);
    const row: Round = {
      ...(zero ? { zero } : {}),
      decisionS: round1(decisionS),
      countS: round1((countAt - started) / 1000),
      readyS: round1((readyAt - started) / 1000),
      decisions: back.timeline.filter((e) => e.step === 'scale').map((e) => e.detail?.split(':')[0] ?? ''),
      steadyEvents,
      steadyEventsPerHour: Math.round((steadyEvents * 3_600_000) / config.steadyMs),
      scaleInS: round1(scaleInS),
      ...load.counts,
    };
    log(`round ${n}: ${JSON.stringify(row)}`);
    return row;
  } finally {
    await deleteModel(client, ref, { wait: true, timeoutMs: 120_000 }).catch(() => undefined);
  }
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** The URLs the local stack's supervisor publishes (docs/local-stack.md). */
const endpoints = () =>
  JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;

/** Waits for the model to go to zero, then times one streamed completion sent to its front. */
async function atZero(ref: ModelRef, name: string, loadEndedAt: number): Promise<Round['zero']> {
  const front = await until("the model's front", 60_000, async () =>
    endpoints()[`${namespace}/${name}-engine`] ? endpoints()[`${namespace}/${name}`] : undefined,
  );
  await until('phase Idle', ms('idle', config.idleToZeroAfter!) + 5 * 60_000, async () => {
    const s = await getModelStatus(client, ref);
    return s.phase === 'Idle' ? s : undefined;
  });
  const idleAfterS = round1((Date.now() - loadEndedAt) / 1000);
  // The replica gone for good: what the request meets is a model at zero, not one on its way down.
  await until('no engine pod', 60_000, async () => {
    const pods = await core.listNamespacedPod({
      namespace,
      labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
    });
    return pods.items.length === 0;
  });
  // And its stand-in stopped: the local stack stops it at its next pass (a second), where a Service would have let go
  // of the pod before it went; a request sent in between would reach the stand-in and be cut with it.
  await until('no stand-in', 60_000, async () =>
    Object.keys(endpoints()).every((k) => !k.startsWith(`${namespace}/${name}/`) || k.includes(`/${name}-front-`)),
  );
  const r = await streamOnce(front, config.outputTokens, 10 * 60_000);
  // Answered otherwise, it woke nothing: say so, rather than wait for a Ready that will not come.
  if (r.status !== 200) throw new Error(`the request at zero was answered ${r.status}: ${r.body.slice(0, 300)}`);
  await until('Ready again', 60_000, async () => (await getModelStatus(client, ref)).phase === 'Ready');
  return {
    idleAfterS,
    status: r.status,
    ...(r.ttftMs !== undefined ? { firstTokenS: round1(r.ttftMs / 1000) } : {}),
    totalS: round1(r.totalMs / 1000),
    done: r.done,
  };
}

const rounds: Round[] = [];
try {
  for (let n = 1; n <= config.rounds; n++) rounds.push(await round(n));
  const p50 = (pick: (r: Round) => number) => round1(percentile(rounds.map(pick), 50));
  const summary = {
    scaleOutDecisionP50S: p50((r) => r.decisionS),
    scaleOutCountP50S: p50((r) => r.countS),
    scaleOutReadyP50S: p50((r) => r.readyS),
    scaleInP50S: p50((r) => r.scaleInS),
    steadyEventsPerModelHourMax: Math.max(...rounds.map((r) => r.steadyEventsPerHour)),
    failedRequests: rounds.reduce((sum, r) => sum + r.failed + (r.zero && !r.zero.done ? 1 : 0), 0),
    ...(config.idleToZeroAfter !== undefined
      ? {
          zeroToFirstTokenP50S: round1(
            percentile(
              rounds.flatMap((r) => r.zero?.firstTokenS ?? []),
              50,
            ),
          ),
        }
      : {}),
    answeredRequests: rounds.reduce((sum, r) => sum + r.answered, 0),
  };
  log(`summary: ${JSON.stringify(summary)}`);
  console.log(JSON.stringify({ machine: machine(), config: { ...config, wanted }, rounds, summary }, null, 2));
  if (summary.failedRequests > 0 || summary.steadyEventsPerModelHourMax > 30) process.exitCode = 1;
} catch (err) {
  process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await deleteNamespace(kc, namespace);
  await worker.stop();
  await client.connection.close();
}
