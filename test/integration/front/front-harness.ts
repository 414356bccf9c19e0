// A real HAProxy (Debian's, installed by deploy/local/install.sh) with a front's configuration on loopback, in front
// of engine stand-ins, for the tests of the front (hold.test.ts, split.test.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { FRONT_DEFAULTS, frontConfig, REVISION_HEADER, type FrontOptions } from '../../../activities/builders/front.js';
import { frontConfigFor } from '../../../activities/builders/front-objects.js';
import type { RevisionShare, ServedModel } from '../../../workflows/contract/index.js';
import { freePort } from '../../support/e2e.js';

const HAPROXY = '/usr/sbin/haproxy';
const stops: (() => Promise<void>)[] = [];

/** Stops every HAProxy and stand-in started since the last call, newest first (each test's afterEach). */
export async function stopAll(): Promise<void> {
  for (const stop of stops.splice(0).reverse()) await stop();
}

/**
 * A running HAProxy with the front's configuration for `options`, in front of `127.0.0.1:<enginePort>` as revision
 * `r1` (or of each revision in `servers`); with `model`, the configuration as deployed for that model
 * (front-objects.ts), with only its addresses moved onto loopback.
 */
export async function startFront(
  engines: number | FrontOptions['servers'],
  options: Partial<FrontOptions> = {},
  model?: ServedModel,
): Promise<{ url: string; metricsPort: number }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'ferry-front-'));
  const file = join(dir, 'haproxy.cfg');
  const servers =
    typeof engines === 'number' ? [{ revision: 'r1', address: `127.0.0.1:${engines}`, weight: 100 }] : engines;
  const loopback = { bind: `127.0.0.1:${port}`, servers, metricsBind: `127.0.0.1:${metricsPort}` };
  const config = model
    ? frontConfigFor(model, { ...loopback, ...options })
    : frontConfig({ ...FRONT_DEFAULTS, ...loopback, ...options });
  writeFileSync(file, config);
  let log = '';
  const proc: ChildProcess = spawn(HAPROXY, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.on('data', (d) => (log += d));
  proc.stderr!.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  stops.push(async () => {
    proc.kill('SIGTERM');
    await exited;
  });
  for (let tries = 0; ; tries++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = createConnection(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      }).on('error', () => resolve(false));
    });
    if (up) return { url: `http://127.0.0.1:${port}`, metricsPort };
    if (proc.exitCode !== null || tries > 100) throw new Error(`haproxy did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The shares of `frontConfigFor` as loopback servers: each revision at `ports[revision]`. */
export function loopbackServers(
  shares: readonly RevisionShare[],
  ports: Record<string, number>,
): FrontOptions['servers'] {
  return shares.map((s) => ({ revision: s.revision, address: `127.0.0.1:${ports[s.revision]}`, weight: s.weight }));
}

/** An engine stand-in serving model `m` on `port`, stopped by `stopAll`. */
export async function startEngine(port: number): Promise<EngineSim> {
  const sim = createEngineSim({ port, servedModelNames: ['m'], loadDelaySeconds: 0 });
  await sim.start();
  stops.push(() => sim.stop());
  return sim;
}

export interface Answer {
  status: number;
  retryAfter: string | null;
  /** The revision that answered, as the front names it (`x-ferry-revision`). */
  revision: string | null;
  body: string;
  ms: number;
}

export async function ask(url: string, path: string, body?: unknown): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: body ? { 'content-type': 'application/json' } : {},
    ...(body ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    revision: res.headers.get(REVISION_HEADER),
    body: text,
    ms: performance.now() - started,
  };
}
