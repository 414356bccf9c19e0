// Cluster east of the local stack (`npm run local:up -- --clusters 2`, docs/local-stack.md): the tests that span two
// clusters use it. When the stack runs one cluster, the file's tests start east with that very command and stop it
// after them (`down.sh east`), so the rest of the suite does not carry a second control plane; an east already
// running is used and left.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
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
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 0);
      return true;
    } catch {
      return false;
    }
  });
}

/** East for the file's tests: started before them if it is not running (about 30 s), stopped after them if so. */
export function useEast(): East {
  const east = {} as East;
  let started = false;
  beforeAll(async () => {
    if (!eastRunning()) {
      const engine = readFileSync(join(repoRoot, '.ferry/run/engine'), 'utf8').trim();
      const env: NodeJS.ProcessEnv = { ...process.env, FERRY_SKIP_INSTALL: '1' };
      for (const k of ['FERRY_CLUSTER', 'FERRY_CLUSTERS', 'FERRY_ENGINE', 'FERRY_RUN_DIR']) delete env[k];
      await run('bash', [join(repoRoot, 'deploy/local/up.sh'), '--engine', engine, '--clusters', '2'], {
        env,
        cwd: repoRoot,
      });
      started = true;
    }
    const kubeconfig = readLocalEnv().KUBECONFIG_EAST;
    if (!kubeconfig) throw new Error('local:up -- --clusters 2 wrote no KUBECONFIG_EAST to .ferry/local.env');
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    Object.assign(east, { kubeconfig, kube: clientsFor(kc), endpoints: join(eastRun, 'endpoints.json') });
  }, 180_000);
  afterAll(async () => {
    if (started) await run('bash', [join(repoRoot, 'deploy/local/down.sh'), 'east'], { cwd: repoRoot });
  }, 60_000);
  return east;
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
