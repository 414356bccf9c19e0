// Chaos, part (c): the Temporal dev server or the kube-apiserver of the local stack restarted in the middle of a
// model's rollout (`deploy/local/down.sh <component>`, then `up.sh <component>`; Temporal keeps its SQLite file, the
// API server its etcd). The `ferry serve --wait` process, the worker and the workflow must ride it out: the model
// Ready with exactly its objects, the CLI exiting 0, status never Ready early; then a delete, which must leave
// nothing. Times: how long the component was down, and from its return to Ready.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { getModelStatus } from '../../client/model-status.js';
import { median, type Harness, log } from './harness.js';
import { repoRoot, sleep } from '../lib.js';

const run = promisify(execFile);

export type Component = 'temporal' | 'kube-apiserver';
export const COMPONENTS: Component[] = ['temporal', 'kube-apiserver'];

interface Restart {
  component: Component;
  model: string;
  /** The phase the model was in when the component went down. */
  during: string;
  downMs: number;
  backToReadyMs: number | null;
  converged: boolean;
  falseReady: number;
  exit: number | null;
  cliError?: string;
  deleteExit: number | null;
  duplicates: string[];
  orphans: string[];
}

/** Stops and starts one component of the local stack, as a person would; resolves with how long it was away. */
async function restart(component: Component): Promise<number> {
  const started = performance.now();
  const local = join(repoRoot, 'deploy/local');
  await run('bash', [join(local, 'down.sh'), component], { cwd: repoRoot });
  await run('bash', [join(local, 'up.sh'), component], {
    cwd: repoRoot,
    env: { ...process.env, FERRY_SKIP_INSTALL: '1' },
  });
  return Math.round(performance.now() - started);
}

export async function runRestarts(h: Harness, client: Client, options: { components: Component[]; rounds: number }) {
  await h.startWorker();
  const restarts: Restart[] = [];
  for (let round = 0; round < options.rounds; round++) {
    for (const component of options.components) {
      const ref = h.model(`r-${component === 'temporal' ? 't' : 'k'}${round}`);
      const started = performance.now();
      const serve = h.operation('serve', ref, 'main');
      // Mid-rollout: the weights are pulled and the engine is being rolled out (Starting) or loading.
      let during = '';
      for (;;) {
        const status = await getModelStatus(client, ref).catch(() => undefined);
        if (status?.phase === 'Starting' || status?.phase === 'Ready') {
          during = status.phase;
          break;
        }
        if (performance.now() - started > 5 * 60_000) throw new Error(`${ref.name} never reached Starting`);
        await sleep(50);
      }
      const downMs = await restart(component);
      const back = performance.now();
      const outcome = await h.converge('serve', ref, 1, started);
      const exit = await serve;
      const audit = outcome.converged ? await h.settledAudit(ref.name, true) : { duplicates: [], orphans: [] };
      const deleted = await h.operation('delete', ref, 'main');
      const gone = deleted.code === 0 ? await h.settledAudit(ref.name, false) : { duplicates: [], orphans: [] };
      const r: Restart = {
        component,
        model: ref.name,
        during,
        downMs,
        backToReadyMs: outcome.converged ? Math.max(0, Math.round(outcome.convergedAt - back)) : null,
        converged: outcome.converged,
        falseReady: outcome.falseReady,
        exit: exit.code,
        // All of it: a crash's stack trace is what says why.
        ...(exit.code !== 0 ? { cliError: exit.stderr.trim() } : {}),
        deleteExit: deleted.code,
        duplicates: [...audit.duplicates, ...gone.duplicates],
        orphans: [...audit.orphans, ...gone.orphans, ...(outcome.converged ? [] : ['did not converge'])],
      };
      restarts.push(r);
      log(
        `restart ${component} while ${during} (${ref.name}): down ${downMs} ms, back → Ready ${r.backToReadyMs} ms, ` +
          `serve exit ${r.exit}, delete exit ${r.deleteExit}${r.cliError ? ` (${r.cliError})` : ''}`,
      );
    }
  }
  const summary = {
    restarts: restarts.length,
    converged: restarts.filter((r) => r.converged).length,
    duplicates: restarts.reduce((n, r) => n + r.duplicates.length, 0),
    orphans: restarts.reduce((n, r) => n + r.orphans.length, 0),
    falseReadySamples: restarts.reduce((n, r) => n + r.falseReady, 0),
    spuriousExits: restarts.filter((r) => r.exit !== 0 || r.deleteExit !== 0).length,
    byComponent: Object.fromEntries(
      options.components.map((c) => {
        const of = restarts.filter((r) => r.component === c);
        return [
          c,
          {
            n: of.length,
            downP50Ms: median(of.map((r) => r.downMs)),
            backToReadyP50Ms: median(of.filter((r) => r.backToReadyMs !== null).map((r) => r.backToReadyMs!)),
          },
        ];
      }),
    ),
  };
  const rows: [string, string][] = [
    ['restarts mid-rollout', String(summary.restarts)],
    ['converged', `${summary.converged}/${summary.restarts}`],
    ['duplicate objects', String(summary.duplicates)],
    ['orphan objects', String(summary.orphans)],
    ['false-Ready samples', String(summary.falseReadySamples)],
    ['--wait clients (serve, delete): spurious exits', String(summary.spuriousExits)],
    ...Object.entries(summary.byComponent).map(([c, s]): [string, string] => [
      `${c}: down / back → Ready (p50)`,
      `${s.downP50Ms} / ${s.backToReadyP50Ms} ms (${s.n} restarts)`,
    ]),
  ];
  const ok =
    summary.converged === summary.restarts &&
    !summary.duplicates &&
    !summary.orphans &&
    !summary.falseReadySamples &&
    !summary.spuriousExits;
  return { ok, summary, rows, restarts };
}
