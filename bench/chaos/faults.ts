// Chaos, part (b): a fault-injecting proxy between the worker and the API server (fault-proxy.ts). Two measurements:
//
// - Side by side, round after round on one worker: a model served and deleted with the proxy passing everything,
//   and one with a share of the worker's requests (`rate`) answered by a fault (429 with Retry-After, 500, 503, 409
//   on writes, resets before and after a write, hangs, cut watches). Ready and delete times, faulted ÷ fault-free;
//   false-Ready samples; the `--wait` processes' exits; duplicates and orphans.
// - Outages: every request of the worker answered 503 for `outageMs`, beginning in a step (the claim, the download,
//   the teardown). How long after the first refused request status shows it (a `Kubernetes…` waiting reason or
//   last error), that it clears once the API server answers again, and that the model still converges.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { getModelStatus } from '../../client/model-status.js';
import type { ModelRef, ModelStatus } from '../../workflows/contract/index.js';
import { sleep } from '../lib.js';
import { startFaultProxy, type FaultKind, type FaultProxy } from './fault-proxy.js';
import { log, median, ratio, type CliExit, type Harness } from './harness.js';

export interface FaultOptions {
  rate: number;
  rounds: number;
  seed: number;
  /** The outage probes to run (none: skip them). */
  outages: OutageStep[];
  outageMs: number;
}

export type OutageStep = 'claim' | 'download' | 'teardown';
export const OUTAGE_STEPS: OutageStep[] = ['claim', 'download', 'teardown'];

interface Life {
  model: string;
  faulted: boolean;
  readyMs: number | null;
  deleteMs: number | null;
  converged: boolean;
  falseReady: number;
  exits: (number | null)[];
  cliErrors: string[];
  duplicates: string[];
  orphans: string[];
  injected: Partial<Record<FaultKind, number>>;
  requests: number;
}

interface Outage {
  step: OutageStep;
  model: string;
  /** First refused request → status shows a Kubernetes reason. */
  visibleMs: number | null;
  /** What status showed. */
  shown?: string;
  /** Outage over → the reason gone from status (or the operation done). */
  clearedMs: number | null;
  converged: boolean;
  exit: number | null;
  cliError?: string;
}

/** Status shows a Kubernetes request failing: the step's waiting reason or the last error. */
const kubernetesReason = (s: ModelStatus | undefined): string | undefined =>
  [s?.waiting?.reason, s?.lastError?.reason].find((r) => r?.startsWith('Kubernetes'));

export async function runFaults(h: Harness, kc: KubeConfig, client: Client, options: FaultOptions) {
  // The worker's own kubeconfig (its service account) behind the proxy; the checks here use the admin's, directly.
  const proxy = await startFaultProxy(kc, { seed: options.seed, rate: 0, retryAfterSeconds: 1 });
  try {
    await h.startWorker(proxy.writeKubeconfig());
    const lives: Life[] = [];
    for (let round = 0; round < options.rounds; round++) {
      // Alternating which goes first spreads the machine's drift over both.
      const order = round % 2 === 0 ? [false, true] : [true, false];
      for (const faulted of order) {
        const life = await serveAndDelete(h, proxy, h.model(`${faulted ? 'f' : 'c'}${round}`), faulted, options.rate);
        lives.push(life);
        log(
          `faults ${round + 1}/${options.rounds} ${faulted ? `at ${options.rate * 100} %` : 'fault-free'} ` +
            `${life.model}: Ready ${life.readyMs} ms, delete ${life.deleteMs} ms, exits ${life.exits.join(',')}` +
            `${faulted ? `, ${sumOf(life.injected)} faults in ${life.requests} requests` : ''}` +
            `${life.cliErrors.length ? ` (${life.cliErrors.join(' | ')})` : ''}`,
        );
        if (!life.converged) break;
      }
    }
    const outages: Outage[] = [];
    for (const step of options.outages) {
      const outage = await outageProbe(h, proxy, client, h.model(`o-${step}`), step, options.outageMs);
      outages.push(outage);
      log(
        `outage in ${step}: shown after ${outage.visibleMs} ms (${outage.shown ?? 'nothing'}), cleared ` +
          `${outage.clearedMs} ms after it ended, exit ${outage.exit}${outage.cliError ? ` (${outage.cliError})` : ''}`,
      );
    }
    return summarize(lives, outages, options);
  } finally {
    // The worker reaches the API server only through the proxy: its models are deleted before it closes.
    proxy.set({ rate: 0 });
    await h.deleteModels();
    await proxy.close();
  }
}

async function serveAndDelete(
  h: Harness,
  proxy: FaultProxy,
  ref: ModelRef,
  faulted: boolean,
  rate: number,
): Promise<Life> {
  const before = proxy.counts();
  proxy.set({ rate: faulted ? rate : 0, mix: {} });
  const exits: CliExit[] = [];
  const life: Life = {
    model: ref.name,
    faulted,
    readyMs: null,
    deleteMs: null,
    converged: false,
    falseReady: 0,
    exits: [],
    cliErrors: [],
    duplicates: [],
    orphans: [],
    injected: {},
    requests: 0,
  };
  try {
    let started = performance.now();
    let cli = h.operation('serve', ref, 'main');
    const served = await h.converge('serve', ref, 1, started);
    exits.push(await cli);
    life.falseReady = served.falseReady;
    if (!served.converged) return life;
    life.readyMs = Math.round(served.convergedAt - started);
    const audit = await h.settledAudit(ref.name, true);
    started = performance.now();
    cli = h.operation('delete', ref, 'main');
    const deleted = await h.converge('delete', ref, 1, started);
    exits.push(await cli);
    if (!deleted.converged) return life;
    life.deleteMs = Math.round(deleted.convergedAt - started);
    const after = await h.settledAudit(ref.name, false);
    life.duplicates = [...audit.duplicates, ...after.duplicates];
    life.orphans = [...audit.orphans, ...after.orphans];
    life.converged = true;
    return life;
  } finally {
    proxy.set({ rate: 0 });
    const now = proxy.counts();
    life.requests = now.requests - before.requests;
    for (const kind of Object.keys(now.injected) as FaultKind[]) {
      const n = now.injected[kind] - before.injected[kind];
      if (n > 0) life.injected[kind] = n;
    }
    life.exits = exits.map((e) => e.code);
    life.cliErrors = exits.filter((e) => e.code !== 0).map((e) => e.stderr.trim().split('\n').slice(-2).join(' / '));
    if (!life.converged) life.orphans.push('did not converge');
  }
}

/**
 * Serves `ref` (and, for the teardown, deletes it) with every request of the worker refused for `outageMs` from the
 * moment the step begins; watches status every 100 ms.
 */
async function outageProbe(
  h: Harness,
  proxy: FaultProxy,
  client: Client,
  ref: ModelRef,
  step: OutageStep,
  outageMs: number,
): Promise<Outage> {
  const outage: Outage = { step, model: ref.name, visibleMs: null, clearedMs: null, converged: false, exit: null };
  let firstRefusal: number | undefined;
  let outageOver: number | undefined;
  let on = false;
  const begin = () => {
    const from = proxy.log().length;
    proxy.set({ rate: 1, mix: { http503: 1 } });
    on = true;
    const end = performance.now() + outageMs;
    return (async () => {
      while (performance.now() < end) {
        firstRefusal ??= proxy
          .log()
          .slice(from)
          .find((r) => r.fault === 'http503')?.at;
        await sleep(20);
      }
      firstRefusal ??= proxy
        .log()
        .slice(from)
        .find((r) => r.fault === 'http503')?.at;
      proxy.set({ rate: 0, mix: {} });
      on = false;
      outageOver = performance.now();
    })();
  };
  /** Records when status shows the outage and when it no longer does; resolves with the CLI's exit. */
  const watch = async (cli: Promise<CliExit>, done: (s: ModelStatus | undefined) => boolean) => {
    let finished: CliExit | undefined;
    void cli.then((e) => (finished = e));
    for (;;) {
      const status = await getModelStatus(client, ref).catch(() => undefined);
      const at = performance.now();
      const reason = kubernetesReason(status);
      if (reason && outage.visibleMs === null && firstRefusal !== undefined) {
        outage.visibleMs = Math.max(0, Math.round(at - firstRefusal));
        outage.shown = `${status?.phase}: ${reason}`;
      }
      if (outageOver !== undefined && outage.clearedMs === null && (!reason || done(status))) {
        outage.clearedMs = Math.round(at - outageOver);
      }
      if (finished && outageOver !== undefined) return finished;
      if (performance.now() - (outageOver ?? at) > 5 * 60_000) return { code: null, stderr: 'gave up after 5 min' };
      await sleep(100);
    }
  };

  let ending: Promise<void> | undefined;
  try {
    if (step === 'claim') ending = begin();
    const serve = h.operation('serve', ref, 'main');
    if (step === 'download') {
      for (;;) {
        const s = await getModelStatus(client, ref).catch(() => undefined);
        if (s?.phase === 'Downloading') break;
        await sleep(50);
      }
      ending = begin();
    }
    if (step === 'teardown') {
      const exit = await serve;
      if (exit.code !== 0) return { ...outage, exit: exit.code, cliError: exit.stderr.trim() };
      ending = begin();
      const exited = await watch(h.operation('delete', ref, 'main'), (s) => s === undefined || s.phase === 'Deleted');
      await ending;
      const closed = await h.converge('delete', ref, 1, performance.now());
      return finish(exited, closed.converged);
    }
    const exited = await watch(serve, (s) => s?.phase === 'Ready');
    await ending;
    return finish(exited, exited.code === 0);
  } finally {
    if (on) proxy.set({ rate: 0, mix: {} });
    await ending;
  }

  function finish(exit: CliExit, converged: boolean): Outage {
    return {
      ...outage,
      converged,
      exit: exit.code,
      ...(exit.code !== 0 ? { cliError: exit.stderr.trim().split('\n').slice(-2).join(' / ') } : {}),
    };
  }
}

const sumOf = (counts: Partial<Record<string, number>>): number =>
  Object.values(counts).reduce<number>((a, b) => a + (b ?? 0), 0);

function summarize(lives: Life[], outages: Outage[], options: FaultOptions) {
  const times = (faulted: boolean, key: 'readyMs' | 'deleteMs') =>
    median(lives.filter((l) => l.faulted === faulted && l[key] !== null).map((l) => l[key]!));
  const ready = { faultFree: times(false, 'readyMs'), faulted: times(true, 'readyMs') };
  const del = { faultFree: times(false, 'deleteMs'), faulted: times(true, 'deleteMs') };
  const injected: Record<string, number> = {};
  for (const l of lives) for (const [k, n] of Object.entries(l.injected)) injected[k] = (injected[k] ?? 0) + (n ?? 0);
  const faultedLives = lives.filter((l) => l.faulted);
  const summary = {
    rate: options.rate,
    models: lives.length,
    converged: lives.filter((l) => l.converged).length,
    duplicates: lives.reduce((n, l) => n + l.duplicates.length, 0),
    orphans: lives.reduce((n, l) => n + l.orphans.length, 0),
    falseReadySamples: lives.reduce((n, l) => n + l.falseReady, 0),
    spuriousExits: lives.reduce((n, l) => n + l.exits.filter((e) => e !== 0).length, 0),
    readyP50Ms: ready,
    deleteP50Ms: del,
    readyRatio: ratio(ready.faulted, ready.faultFree),
    deleteRatio: ratio(del.faulted, del.faultFree),
    injected,
    faultedRequests: faultedLives.reduce((n, l) => n + l.requests, 0),
    outages: outages.map(({ step, visibleMs, clearedMs, converged, exit }) => ({
      step,
      visibleMs,
      clearedMs,
      converged,
      exit,
    })),
  };
  const rows: [string, string][] = [
    [`models served and deleted (half at ${options.rate * 100} % faults)`, String(summary.models)],
    ['converged', `${summary.converged}/${summary.models}`],
    ['duplicate objects', String(summary.duplicates)],
    ['orphan objects', String(summary.orphans)],
    ['false-Ready samples', String(summary.falseReadySamples)],
    ['--wait clients: spurious exits', String(summary.spuriousExits)],
    ['Ready, fault-free / faulted (p50)', `${ready.faultFree} / ${ready.faulted} ms (${summary.readyRatio}×)`],
    ['delete, fault-free / faulted (p50)', `${del.faultFree} / ${del.faulted} ms (${summary.deleteRatio}×)`],
    [
      'faults injected',
      `${sumOf(injected)} in ${summary.faultedRequests} requests: ${Object.entries(injected)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ')}`,
    ],
    ...outages.map((o): [string, string] => [
      `API outage in ${o.step} (${options.outageMs / 1000} s): shown / cleared`,
      `${o.visibleMs} ms after the first refusal (${o.shown ?? 'nothing'}) / ${o.clearedMs} ms after, ` +
        `${o.converged ? 'converged' : 'DID NOT CONVERGE'}, exit ${o.exit}`,
    ]),
  ];
  const ok =
    summary.converged === summary.models &&
    !summary.duplicates &&
    !summary.orphans &&
    !summary.falseReadySamples &&
    !summary.spuriousExits &&
    outages.every((o) => o.converged && o.exit === 0 && o.visibleMs !== null);
  return { ok, summary, rows, lives, outages };
}
