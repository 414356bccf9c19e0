// Local runs only: what an engine pod's admission sidecar does, for a simulated pod (which runs nothing). Debian's
// nginx (installed by deploy/local/install.sh) in front of the pod's engine stand-in on 127.0.0.1, with the
// configuration Ferry's builder generates from the limit in the model's `<model>-admission` ConfigMap; when the
// limit there changes, the configuration is rewritten and nginx reloaded, as the sidecar does on the mounted file.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { admissionConfig, ADMISSION_RETRY_AFTER_SECONDS } from '../../activities/builders/admission.js';

export const NGINX = '/usr/sbin/nginx';

/** For a pod with the admission sidecar: its ConfigMap's name (from the sidecar's volume). */
export function admissionConfigOf(pod: V1Pod): string | undefined {
  const sidecar = pod.spec?.containers.find((c) => c.name === 'admission');
  const mounted = new Set((sidecar?.volumeMounts ?? []).map((m) => m.name));
  return pod.spec?.volumes?.find((v) => mounted.has(v.name) && v.configMap)?.configMap?.name;
}

const START_TIMEOUT_MS = 10_000;

/** One nginx in front of one stand-in. */
export class AdmissionProxy {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly enginePort: number,
    readonly port: number,
    /** The limit it enforces now (undefined: none). */
    public limit: number | undefined,
  ) {}

  static available(): boolean {
    return existsSync(NGINX);
  }

  /** Starts nginx on a free port of 127.0.0.1 in front of the stand-in on `enginePort`; resolves once it listens. */
  static async start(enginePort: number, limit: number | undefined): Promise<AdmissionProxy> {
    // nginx runs its worker as `nobody` when started as root: the prefix must be readable by it.
    const dir = mkdtempSync(join(tmpdir(), 'ferry-admission-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    writeFileSync(join(dir, 'nginx.conf'), config(port, enginePort, limit));
    // Its own process group: a worker process outlives a killed master and would keep the port.
    const child = spawn(NGINX, ['-p', `${dir}/`, '-c', join(dir, 'nginx.conf'), '-e', 'stderr', '-g', 'daemon off;'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    let stderr = '';
    child.stderr?.on('data', (d) => (stderr = (stderr + String(d)).slice(-2_000)));
    const proxy = new AdmissionProxy(child, dir, enginePort, port, limit);
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await answers(port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        proxy.stop();
        throw new Error(`nginx did not start: ${stderr.trim() || `exit ${child.exitCode}`}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Rewrites the configuration for `limit` and reloads nginx (requests in flight finish on the old workers). */
  setLimit(limit: number | undefined): void {
    if (limit === this.limit) return;
    writeFileSync(join(this.dir, 'nginx.conf'), config(this.port, this.enginePort, limit));
    const reload = spawnSync(
      NGINX,
      ['-p', `${this.dir}/`, '-c', join(this.dir, 'nginx.conf'), '-e', 'stderr', '-s', 'reload'],
      { encoding: 'utf8' },
    );
    if (reload.status !== 0) throw new Error(`nginx refused the new limit ${limit}: ${reload.stderr.trim()}`);
    this.limit = limit;
  }

  stop(): void {
    if (this.child.exitCode === null && this.child.pid) {
      try {
        process.kill(-this.child.pid, 'SIGQUIT');
      } catch {
        // Already gone.
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function config(port: number, enginePort: number, limit: number | undefined): string {
  return admissionConfig({
    listenPort: port,
    listenAddress: '127.0.0.1',
    enginePort,
    maxConcurrency: limit,
    retryAfterSeconds: ADMISSION_RETRY_AFTER_SECONDS,
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

async function answers(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/version`, { signal: AbortSignal.timeout(1_000) }).then(
    () => true,
    () => false,
  );
}
