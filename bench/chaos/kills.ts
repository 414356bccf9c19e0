// Chaos, part (a): the worker SIGKILLed at a random moment of a serve, an update or a delete, and started again at
// once. Each trial is one operation by a `ferry … --wait` process with one kill in it; the worker comes back as soon
// as the old one is dead. It checks that the `--wait` process exits 0 (no spurious exit), that the model converges
// (Ready at the new generation; for a delete, its workflow closed and nothing of it left), with exactly its objects,
// and that status never says Ready while the current revision has no ready pod. Times: restart → converged (from the
// moment the new worker polls), and each operation against the same operation without a kill, measured first.
import type { Client } from '@temporalio/client';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { bundleFerryWorkflows } from '../../worker/workflow-bundle.js';
import { modelEventsSinks } from '../../worker/model-events.js';
import { workflowIdFor, type ModelRef } from '../../workflows/contract/index.js';
import { percentile, sleep } from '../lib.js';
import { KINDS, log, median, ratio, type Harness, type Kind, type Outcome } from './harness.js';

export interface KillOptions {
  kills: number;
  /** Fault-free rounds (serve, update, delete each) first. */
  baselineRounds: number;
  /** The operations that get a kill (the others of a model's life still run, fault-free, to move it along). */
  kinds: Set<Kind>;
  random: () => number;
}

export interface KillTrial {
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
  /** It did not converge because its workflow task fails on a nondeterminism error (docs/resilience.md, "Known"). */
  nondeterminism?: boolean;
}

/**
 * Replays the latest run of every model's workflow with the code the worker ran (dist/). A trial can converge with a
 * history that does not replay: the SDK split the signal and the update of a lost workflow task into two activations
 * live and merges them in replay (docs/resilience.md, "Known"). Nothing notices until a worker replays that history
 * — after its next restart, or once the cache evicts it — and then the workflow is stuck. Returns how many histories
 * were replayed and the models whose history fails, with the error.
 */
async function replayAll(
  client: Client,
  refs: ModelRef[],
): Promise<{ replayed: number; failures: { model: string; error: string }[] }> {
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
  // The replayer's own worker logs each state change; only its warnings are worth a line here.
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // A runtime of this process is already there (its logger stays).
  }
  const workflowBundle = await bundleFerryWorkflows(quiet);
  const failures: { model: string; error: string }[] = [];
  let replayed = 0;
  for (const ref of refs) {
    const workflowId = workflowIdFor(ref);
    const history = await client.workflow
      .getHandle(workflowId)
      .fetchHistory()
      .catch(() => undefined);
    if (!history) continue;
    replayed++;
    try {
      await Worker.runReplayHistory(
        { workflowBundle, sinks: modelEventsSinks({ logger: quiet }) },
        history,
        workflowId,
      );
    } catch (err) {
      failures.push({ model: ref.name, error: (err as Error).message.split('\n')[0]!.slice(0, 300) });
    }
  }
  return { replayed, failures };
}

export async function runKills(h: Harness, options: KillOptions) {
  await h.startWorker();

  /** One operation; with `killWithinMs`, the worker is SIGKILLed at a random moment within it and started again. */
  async function run(
    trial: number,
    kind: Kind,
    ref: ModelRef,
    revision: string,
    generation: number,
    killWithinMs?: number,
  ): Promise<KillTrial> {
    const started = performance.now();
    const cli = h.operation(kind, ref, revision);
    const outcome = h.converge(kind, ref, generation, started);
    let killAtMs: number | undefined;
    let backAt: number | undefined;
    let killedAfterConverged = false;
    if (killWithinMs !== undefined) {
      killAtMs = Math.round(options.random() * killWithinMs);
      killedAfterConverged = await Promise.race([outcome.then(() => true), sleep(killAtMs).then(() => false)]);
      await h.killWorker();
      await h.startWorker();
      backAt = performance.now();
    }
    // A `--wait` process that failed may leave nothing to converge: give the model 30 s more, then record the trial.
    const gaveUp = cli.then(async (e): Promise<Outcome> => {
      if (e.code === 0) return outcome;
      await sleep(30_000);
      return { converged: false, convergedAt: performance.now(), falseReady: 0 };
    });
    const { converged, convergedAt, falseReady } = await Promise.race([outcome, gaveUp]);
    const nondeterminism = !converged && /\bTMPRL1100\b|Nondeterminism/.test((await h.lastTaskFailure(ref)) ?? '');
    if (!converged) log(`${kind} ${ref.name} did not converge:\n${await h.diagnose(ref)}`);
    const exit = await cli;
    const { duplicates, orphans } = converged
      ? await h.settledAudit(ref.name, kind !== 'delete')
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
      ...(nondeterminism ? { nondeterminism } : {}),
    };
  }

  /** serve → update (new revision: the whole sequence again) → delete, on a new model; kills as asked. */
  async function lifecycle(prefix: string, trials: number, killWithin?: Record<Kind, number>): Promise<KillTrial[]> {
    const out: KillTrial[] = [];
    for (let i = 0; out.length < trials; i++) {
      const ref = h.model(`${prefix}${i}`);
      for (const [step, kind] of KINDS.entries()) {
        if (out.length >= trials) break;
        const revision = kind === 'serve' ? 'main' : `rev-${i}`;
        const killWithinMs = killWithin && options.kinds.has(kind) ? killWithin[kind] : undefined;
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

  const baseline = await lifecycle('b', options.baselineRounds * KINDS.length);
  const fastest = (kind: Kind) => median(baseline.filter((t) => t.kind === kind && t.converged).map((t) => t.totalMs));
  const baselineMs = { serve: fastest('serve'), update: fastest('update'), delete: fastest('delete') };
  // The kill lands anywhere in the operation's fault-free duration.
  const trials = await lifecycle('k', options.kills, {
    serve: baselineMs.serve ?? 15_000,
    update: baselineMs.update ?? 15_000,
    delete: baselineMs.delete ?? 2_000,
  });

  const { replayed, failures: latent } = await replayAll(h.client, h.models);
  for (const f of latent) log(`${f.model}: its history does not replay: ${f.error}`);

  const restarts = trials.filter((t) => t.restartToConvergedMs !== undefined).map((t) => t.restartToConvergedMs!);
  const killedRatio = (kind: Kind) =>
    ratio(median(trials.filter((t) => t.kind === kind && t.converged).map((t) => t.totalMs)), baselineMs[kind]);
  const summary = {
    trials: trials.length,
    converged: trials.filter((t) => t.converged).length,
    duplicates: trials.reduce((n, t) => n + t.duplicates.length, 0),
    orphans: trials.reduce((n, t) => n + t.orphans.length, 0),
    falseReadySamples: trials.reduce((n, t) => n + t.falseReady, 0) + baseline.reduce((n, t) => n + t.falseReady, 0),
    spuriousExits: trials.filter((t) => t.cliExit !== 0).length,
    stuckOnNondeterminism: trials.filter((t) => t.nondeterminism).length,
    historiesReplayed: replayed,
    historiesNotReplaying: latent.length,
    killsMidOperation: restarts.length,
    restartToConvergedP50Ms: median(restarts),
    restartToConvergedP90Ms: restarts.length ? Math.round(percentile(restarts, 90)) : null,
    restartToConvergedMaxMs: restarts.length ? Math.max(...restarts) : null,
    baselineP50Ms: baselineMs,
    medianVsBaseline: { serve: killedRatio('serve'), update: killedRatio('update'), delete: killedRatio('delete') },
  };
  const rows: [string, string][] = [
    ['trials (SIGKILL each)', String(summary.trials)],
    ['converged', `${summary.converged}/${summary.trials}`],
    ['duplicate objects', String(summary.duplicates)],
    ['orphan objects', String(summary.orphans)],
    ['false-Ready samples', String(summary.falseReadySamples)],
    ['--wait clients: spurious exits', String(summary.spuriousExits)],
    ['stuck on an SDK nondeterminism error', String(summary.stuckOnNondeterminism)],
    ['histories that do not replay (latent)', `${summary.historiesNotReplaying}/${summary.historiesReplayed}`],
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
  const ok =
    summary.converged === summary.trials &&
    !summary.duplicates &&
    !summary.orphans &&
    !summary.falseReadySamples &&
    !summary.spuriousExits &&
    !summary.historiesNotReplaying;
  return { ok, summary, rows, trials, latent };
}
