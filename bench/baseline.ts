// The load baseline against the engine stand-in's capacity model: for each --max-num-seqs N, a model is served through
// Ferry (a worker of the benchmark's own, the real workflow, the real measurement by streaming HTTP to the pod's
// stand-in), its status.baseline.maxConcurrency read, and the model deleted; repeated. The stand-in's model
// (deploy/engine-sim/README.md, "Capacity model") predicts the answer; the tolerance is ±1 at 8 and ±2 at 16
// (N ÷ 8, at least 1). On each N's first model, twice the measured concurrency is sent at once through the model's
// admission (nginx's limit_conn from the baseline): the excess must get 429 with Retry-After at once, the admitted
// must meet the goal, and nothing may hang; it prints the 429 ratio.
//
//   npm run bench:baseline -- [--seqs 8,16] [--repeats 3] [--token-delay-ms 20] [--batch-step-ms 0]
//                             [--output-tokens 32] [--prompt-tokens 16] [--ttft 300ms] [--itl 100ms]
//
// Simulated: KWOK pods and the engine (the stand-in, one per pod, whose latency is its capacity model's). Real: the
// Temporal server, the API server and controllers, the worker, the workflow and the measurement's HTTP.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { deleteModel } from '../client/delete-model.js';
import { serveModel } from '../client/serve-model.js';
import { parseDuration, type Baseline } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteNamespace,
  instantModel,
  localEnv,
  machine,
  repoRoot,
  startWorker,
  streamOnce,
  temporalClient,
  uniqueName,
  wholeOption,
} from './lib.js';

const { values } = parseArgs({
  options: {
    seqs: { type: 'string', default: '8,16' },
    repeats: { type: 'string', default: '3' },
    'token-delay-ms': { type: 'string', default: '20' },
    'batch-step-ms': { type: 'string', default: '0' },
    'prompt-tokens': { type: 'string', default: '16' },
    'output-tokens': { type: 'string', default: '32' },
    ttft: { type: 'string', default: '300ms' },
    itl: { type: 'string', default: '100ms' },
    'max-concurrency': { type: 'string', default: '64' },
  },
});

const positive = wholeOption;
const seqs = values.seqs.split(',').map((s) => positive('seqs', s.trim()));
const repeats = positive('repeats', values.repeats);
const knobs = {
  tokenDelayMs: positive('token-delay-ms', values['token-delay-ms']),
  batchStepMs: positive('batch-step-ms', values['batch-step-ms'], 0),
  promptTokens: positive('prompt-tokens', values['prompt-tokens']),
  outputTokens: positive('output-tokens', values['output-tokens']),
  maxConcurrency: positive('max-concurrency', values['max-concurrency']),
};
const goal = {
  ttft: values.ttft,
  itl: values.itl,
  ttftMs: parseDuration(values.ttft),
  itlMs: parseDuration(values.itl),
};

const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

/**
 * What the stand-in's capacity model predicts (its README): below N, a request's first token comes one step after
 * it is sent and every step takes step(c); beyond N, a request waits a whole answer for a slot, which misses any
 * time-to-first-token goal shorter than that.
 */
function predicted(n: number): number {
  const step = (c: number) => knobs.tokenDelayMs + knobs.batchStepMs * (c - 1);
  if (goal.ttftMs >= knobs.outputTokens * step(n)) {
    throw new Error('the goal allows a queued request: the prediction needs --ttft below one whole answer');
  }
  let best = 0;
  for (let c = 1; c <= Math.min(n, knobs.maxConcurrency); c++) {
    if (step(c) <= goal.itlMs && step(c) <= goal.ttftMs) best = c;
  }
  return best;
}

const kc = adminKubeConfig();
const env = localEnv();
const client = await temporalClient();
const cluster = uniqueName('baseline');
const namespace = cluster;
await createNamespace(kc, namespace);
const worker = await startWorker(cluster, env.KUBECONFIG);

interface Admission {
  limit: number;
  sent: number;
  admitted: number;
  turnedAway: number;
  ratio429: number;
  withRetryAfter: number;
  /** Of the admitted, those whose first token came within the goal's ttft and that streamed to [DONE]. */
  admittedMeetingGoal: number;
  /** The slowest 429, from the request to its answer. */
  slowest429Ms: number;
  /** Requests that neither completed nor were turned away (a hang ends at the 30 s timeout as an error). */
  other: number;
}

/**
 * Twice the baseline at once through the model's URL — the Service's stand-in, which reaches the engine through its
 * admission sidecar (locally: Debian's nginx in front of the pod's stand-in). The limit reaches nginx within about a
 * second of the ConfigMap's change (the supervisor's sync): a burst is sent again until the limit is live, 20 s at most.
 */
async function admissionBurst(name: string, limit: number): Promise<Admission> {
  const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;
  const url = urls[`${namespace}/${name}`];
  if (!url) throw new Error(`no URL for ${namespace}/${name} in .ferry/run/endpoints.json`);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const results = await Promise.all(
      Array.from({ length: 2 * limit }, () => streamOnce(url, knobs.outputTokens).catch(() => undefined)),
    );
    const ok = results.filter((r) => r?.status === 200);
    const away = results.filter((r) => r?.status === 429);
    if (ok.length > limit && Date.now() < deadline) continue;
    return {
      limit,
      sent: results.length,
      admitted: ok.length,
      turnedAway: away.length,
      ratio429: Math.round((away.length / results.length) * 1000) / 1000,
      withRetryAfter: away.filter((r) => r?.retryAfter).length,
      admittedMeetingGoal: ok.filter((r) => r?.done && (r.ttftMs ?? Infinity) <= goal.ttftMs).length,
      slowest429Ms: Math.round(Math.max(0, ...away.map((r) => r!.ms))),
      other: results.length - ok.length - away.length,
    };
  }
}

async function measureOnce(n: number, trial: number): Promise<{ baseline: Baseline; admission?: Admission }> {
  const name = `n${n}-${trial}`;
  const doc = instantModel(name, namespace, cluster, 0);
  const spec = doc.spec as Record<string, unknown>;
  spec.engine = {
    startupTimeout: '5m',
    args: [`--max-num-seqs=${n}`],
    env: [
      { name: 'FERRY_SIM_TOKEN_DELAY_MS', value: String(knobs.tokenDelayMs) },
      { name: 'FERRY_SIM_BATCH_STEP_MS', value: String(knobs.batchStepMs) },
    ],
  };
  spec.slo = {
    ttft: goal.ttft,
    itl: goal.itl,
    workload: { promptTokens: knobs.promptTokens, outputTokens: knobs.outputTokens },
    maxConcurrency: knobs.maxConcurrency,
  };
  const served = await serveModel(client, doc, { wait: true, timeoutMs: 10 * 60_000 });
  try {
    const baseline = served.status?.baseline;
    if (!baseline) throw new Error(`${name} became Ready without a baseline`);
    // The first trial of each N: what admission does with twice that many at once.
    const admission =
      trial === 1 && baseline.maxConcurrency > 0 ? await admissionBurst(name, baseline.maxConcurrency) : undefined;
    return { baseline, ...(admission ? { admission } : {}) };
  } finally {
    await deleteModel(client, served.ref, { wait: true, timeoutMs: 120_000 });
  }
}

const rows: {
  maxNumSeqs: number;
  predicted: number;
  tolerance: number;
  measured: number[];
  withinTolerance: boolean;
  sameEveryTime: boolean;
  measureSeconds: number[];
  probes: string[];
  admission?: Admission;
}[] = [];
try {
  for (const n of seqs) {
    const expected = predicted(n);
    const tolerance = Math.max(1, Math.floor(n / 8));
    const measured: Baseline[] = [];
    let admission: Admission | undefined;
    for (let trial = 1; trial <= repeats; trial++) {
      const once = await measureOnce(n, trial);
      const b = once.baseline;
      measured.push(b);
      admission ??= once.admission;
      log(`--max-num-seqs ${n}, trial ${trial}/${repeats}: ${b.maxConcurrency} (predicted ${expected}); ${b.probes}`);
      if (once.admission) {
        const a = once.admission;
        log(
          `  ${a.sent} at once through admission: ${a.admitted} admitted (${a.admittedMeetingGoal} within the goal), ${a.turnedAway} turned away with 429 (${a.withRetryAfter} with Retry-After, the slowest in ${a.slowest429Ms} ms), ${a.other} other`,
        );
      }
    }
    const values = measured.map((b) => b.maxConcurrency);
    rows.push({
      maxNumSeqs: n,
      predicted: expected,
      tolerance,
      measured: values,
      withinTolerance: values.every((v) => Math.abs(v - expected) <= tolerance),
      sameEveryTime: values.every((v) => v === values[0]),
      measureSeconds: measured.map((b) => Math.round(b.durationMs / 100) / 10),
      probes: measured.map((b) => b.probes),
      ...(admission ? { admission } : {}),
    });
  }
  for (const r of rows) {
    log(
      `N=${r.maxNumSeqs}: measured ${r.measured.join(', ')}; predicted ${r.predicted} ± ${r.tolerance}: ${r.withinTolerance ? 'within' : 'OUTSIDE'}; ${r.sameEveryTime ? 'the same every time' : 'NOT the same every time'}; ${r.measureSeconds.join(' / ')} s`,
    );
  }
  console.log(
    JSON.stringify(
      { machine: machine(), goal: { ttft: goal.ttft, itl: goal.itl, attainment: 0.95 }, knobs, capacity: rows },
      null,
      2,
    ),
  );
  const admitted = (r: (typeof rows)[number]) =>
    !r.admission ||
    (r.admission.admitted === r.admission.limit &&
      r.admission.turnedAway === r.admission.sent - r.admission.limit &&
      r.admission.withRetryAfter === r.admission.turnedAway &&
      r.admission.admittedMeetingGoal === r.admission.admitted);
  if (!rows.every((r) => r.withinTolerance && admitted(r))) process.exitCode = 1;
} catch (err) {
  process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await deleteNamespace(kc, namespace);
  await worker.stop();
  await client.connection.close();
}
