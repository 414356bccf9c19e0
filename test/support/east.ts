// Cluster east of the local stack (`npm run local:up -- --clusters 2`, docs/local-stack.md): the tests that span two
// clusters use it. When the stack runs one cluster, the first such test file starts east with that very command and
// the last to end stops it (`down.sh east`), so the rest of the suite does not carry a second control plane; an east
// already running is used and left.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { processAlive } from './child-output.js';
import type { WorkerProcess } from './e2e.js';
import type { useWorkerProcesses } from './fixtures.js';
import { clientsFor, type Clients } from './kube.js';
import { readLocalEnv, repoRoot } from './local-env.js';

const run = promisify(execFile);
const eastRun = join(repoRoot, '.ferry/run/east');

export interface East {
  /** East's admin kubeconfig (`KUBECONFIG_EAST`). */
  kubeconfig: string;
  /** Clients on east's API server. */
  kube: Clients;
  /** Where east's engine stand-in supervisor writes its endpoints (a worker for east reads them). */
  endpoints: string;
}

/** Whether east's API server and worker processes are alive (by up.sh's PID files). */
function eastRunning(): boolean {
  return ['kube-apiserver', 'worker'].every((c) => {
    const pidFile = join(eastRun, `${c}.pid`);
    if (!existsSync(pidFile)) return false;
    return processAlive(Number(readFileSync(pidFile, 'utf8').trim()));
  });
}

/**
 * East for the file's tests: started before them if it is not running (about 30 s), stopped after the last test file
 * that uses it (files run in parallel processes: each records itself in `users`, under a lock), if the tests started it.
 */
export function useEast(): East {
  const east = {} as East;
  beforeAll(async () => {
    await underLock(async () => {
      writeFileSync(join(mkdirp(users), String(process.pid)), '');
      if (eastRunning()) return;
      const engine = readFileSync(join(repoRoot, '.ferry/run/engine'), 'utf8').trim();
      const env: NodeJS.ProcessEnv = { ...process.env, FERRY_SKIP_INSTALL: '1' };
      for (const k of ['FERRY_CLUSTER', 'FERRY_CLUSTERS', 'FERRY_ENGINE', 'FERRY_RUN_DIR']) delete env[k];
      await run('bash', [join(repoRoot, 'deploy/local/up.sh'), '--engine', engine, '--clusters', '2'], {
        env,
        cwd: repoRoot,
      });
      writeFileSync(startedByTests, '');
    });
    const kubeconfig = readLocalEnv().KUBECONFIG_EAST;
    if (!kubeconfig) throw new Error('local:up -- --clusters 2 wrote no KUBECONFIG_EAST to .ferry/local.env');
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    Object.assign(east, { kubeconfig, kube: clientsFor(kc), endpoints: join(eastRun, 'endpoints.json') });
  }, 180_000);
  afterAll(async () => {
    await underLock(async () => {
      rmSync(join(users, String(process.pid)), { force: true });
      // Another file's process still using east (one that died without its afterAll does not count).
      if (readdirSync(mkdirp(users)).some((pid) => processAlive(Number(pid)))) return;
      if (!existsSync(startedByTests)) return;
      await run('bash', [join(repoRoot, 'deploy/local/down.sh'), 'east'], { cwd: repoRoot });
      rmSync(startedByTests, { force: true });
    });
  }, 120_000);
  return east;
}

/** The test processes using east now, a file each named by its pid. */
const users = join(repoRoot, '.ferry/run/east-users');
/** Present while an east that the tests started runs: the last user stops it. */
const startedByTests = join(repoRoot, '.ferry/run/east-started-by-tests');
const lock = join(repoRoot, '.ferry/run/east-lock');

function mkdirp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}

function readFileIf(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Runs `fn` holding the lock (a directory: made by one process at a time), taking over one whose holder died. */
async function underLock(fn: () => Promise<void>): Promise<void> {
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // Unreadable: made a moment ago, its holder about to write its pid.
      const holder = Number(readFileIf(join(lock, 'pid')) || 0);
      if (holder && !processAlive(holder)) rmSync(lock, { recursive: true, force: true });
      else await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  try {
    writeFileSync(join(lock, 'pid'), String(process.pid));
    await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** A worker process for cluster `west` on the first control plane and one for `eastCluster` on east's, both polling. */
export async function startWorkersOnBoth(
  start: ReturnType<typeof useWorkerProcesses>,
  east: East,
  west: string,
  eastCluster: string,
): Promise<{ west: WorkerProcess; east: WorkerProcess }> {
  const [w, e] = await Promise.all([start(west), startEastWorker(start, east, eastCluster)]);
  return { west: w, east: e };
}

/** A worker process for `eastCluster` on east's control plane. */
export function startEastWorker(
  start: ReturnType<typeof useWorkerProcesses>,
  east: East,
  eastCluster: string,
): Promise<WorkerProcess> {
  return start(eastCluster, undefined, undefined, {
    KUBECONFIG: east.kubeconfig,
    FERRY_ENDPOINT_OVERRIDES: east.endpoints,
  });
}
