// The chaos suite against the local stack, in three parts, each on a cluster (namespace, task queue, worker) of its
// own, each printing a table:
//
//   (a) kills     the worker SIGKILLed at a random moment of a serve, an update or a delete (chaos/kills.ts);
//   (b) faults    a fault-injecting proxy between the worker and the API server: Ready and delete times at a fault
//                 rate against fault-free ones, and API outages in a step (chaos/faults.ts);
//   (c) restarts  the Temporal dev server and the kube-apiserver restarted mid-rollout (chaos/restarts.ts).
//
// Every operation is a `ferry … --wait` process (the compiled CLI, as a user runs it). The spec parser's fuzz is
// `npm run fuzz`. Exits 1 when any check of any part fails; prints the whole result as JSON on stdout.
//
//   npm run chaos -- [--parts kills,faults,restarts] [--seed 1]
//                    [--kills 50] [--baseline 2] [--kinds serve,update,delete]
//                    [--fault-rate 0.2] [--fault-rounds 5] [--outages claim,download,teardown|none] [--outage 10]
//                    [--restarts temporal,kube-apiserver] [--restart-rounds 2]
//
// Simulated: KWOK pods, the engine stand-in (a 6 s download, a 2 s load). Real: Temporal, the API server, the
// controllers, the worker processes and the CLI. The restarts part restarts the shared local stack's components:
// run nothing else against it meanwhile.
import { KubeConfig } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { runFaults, OUTAGE_STEPS, type OutageStep } from './chaos/faults.js';
import { harness, KINDS, log, table, type Harness, type Kind } from './chaos/harness.js';
import { runKills } from './chaos/kills.js';
import { COMPONENTS, runRestarts, type Component } from './chaos/restarts.js';
import { adminKubeConfig, localEnv, machine, mulberry32, temporalClient } from './lib.js';

const { values } = parseArgs({
  options: {
    parts: { type: 'string', default: 'kills,faults,restarts' },
    seed: { type: 'string', default: '1' },
    kills: { type: 'string', default: '50' },
    baseline: { type: 'string', default: '2' },
    kinds: { type: 'string', default: KINDS.join(',') },
    'fault-rate': { type: 'string', default: '0.2' },
    'fault-rounds': { type: 'string', default: '5' },
    outages: { type: 'string', default: OUTAGE_STEPS.join(',') },
    outage: { type: 'string', default: '10' },
    restarts: { type: 'string', default: COMPONENTS.join(',') },
    'restart-rounds': { type: 'string', default: '2' },
  },
});

/** A comma-separated list of some of `allowed` ('none': empty); anything else stops the run before it starts. */
function listOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  if (value === 'none') return [];
  const items = value.split(',').map((v) => v.trim());
  const bad = items.filter((v) => !allowed.includes(v as T));
  if (bad.length) throw new Error(`--${flag} takes some of ${allowed.join(',')} (or none); got ${bad.join(',')}`);
  return items as T[];
}
function numberOf(flag: string, value: string, { min, max }: { min: number; max: number }): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max)
    throw new Error(`--${flag} takes a number ${min}–${max}; got ${value}`);
  return n;
}

const parts = listOf('parts', values.parts, ['kills', 'faults', 'restarts'] as const);
const seed = numberOf('seed', values.seed, { min: 0, max: 2 ** 32 });
const config = {
  parts,
  seed,
  kills: numberOf('kills', values.kills, { min: 0, max: 10_000 }),
  baseline: numberOf('baseline', values.baseline, { min: 1, max: 100 }),
  kinds: listOf<Kind>('kinds', values.kinds, KINDS),
  faultRate: numberOf('fault-rate', values['fault-rate'], { min: 0, max: 1 }),
  faultRounds: numberOf('fault-rounds', values['fault-rounds'], { min: 1, max: 1_000 }),
  outages: listOf<OutageStep>('outages', values.outages, OUTAGE_STEPS),
  outageMs: 1000 * numberOf('outage', values.outage, { min: 1, max: 25 }),
  restarts: listOf<Component>('restarts', values.restarts, COMPONENTS),
  restartRounds: numberOf('restart-rounds', values['restart-rounds'], { min: 1, max: 100 }),
};

const kc = adminKubeConfig();
const client = await temporalClient();
const open: Harness[] = [];
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}
/** Deletes the parts' models (their GPUs!), namespaces and workers; also on Ctrl-C or SIGTERM. */
async function cleanUp(): Promise<void> {
  for (const h of open.splice(0)) await h.close().catch((err) => log(`clean-up of ${h.cluster}: ${String(err)}`));
}
async function part<T extends { ok: boolean; rows: [string, string][] }>(
  name: string,
  title: string,
  body: (h: Harness) => Promise<T>,
): Promise<T> {
  const h = await harness(kc, client, `chaos-${name}`);
  open.push(h);
  try {
    const result = await body(h);
    process.stderr.write(table(`${title}${result.ok ? '' : '  — FAILED'}`, result.rows));
    return result;
  } finally {
    // Unless Ctrl-C's clean-up took it (and closed it) already.
    const index = open.indexOf(h);
    if (index >= 0) {
      open.splice(index, 1);
      await h.close();
    }
  }
}

const results: Record<string, unknown> = {};
let ok = true;
try {
  if (parts.includes('kills')) {
    const { ok: passed, ...rest } = await part('kills', '(a) worker SIGKILLs', (h) =>
      runKills(h, {
        kills: config.kills,
        baselineRounds: config.baseline,
        kinds: new Set(config.kinds),
        random: mulberry32(seed),
      }),
    );
    ok &&= passed;
    results.kills = { ok: passed, summary: rest.summary, trials: rest.trials, latent: rest.latent };
  }
  if (parts.includes('faults')) {
    // The proxy stands in front of the worker's own kubeconfig (its service account).
    const workerKc = new KubeConfig();
    workerKc.loadFromFile(localEnv().KUBECONFIG);
    const { ok: passed, ...rest } = await part(
      'faults',
      `(b) faults between the worker and the API server (${config.faultRate * 100} %)`,
      (h) =>
        runFaults(h, workerKc, client, {
          rate: config.faultRate,
          rounds: config.faultRounds,
          seed,
          outages: config.outages,
          outageMs: config.outageMs,
        }),
    );
    ok &&= passed;
    results.faults = { ok: passed, summary: rest.summary, lives: rest.lives, outages: rest.outages };
  }
  if (parts.includes('restarts') && config.restarts.length) {
    const { ok: passed, ...rest } = await part('restarts', '(c) Temporal and kube-apiserver restarts', (h) =>
      runRestarts(h, client, { components: config.restarts, rounds: config.restartRounds }),
    );
    ok &&= passed;
    results.restarts = { ok: passed, summary: rest.summary, restarts: rest.restarts };
  }
} catch (err) {
  process.stderr.write(`[chaos] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  ok = false;
} finally {
  await cleanUp();
  await client.connection.close();
}
if (!ok) process.exitCode = 1;
console.log(JSON.stringify({ machine: machine(), config, ok, ...results }, null, 2));
