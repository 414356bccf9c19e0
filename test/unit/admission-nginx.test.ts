// Admission (docs/design/baseline.md, section 5) with the real nginx: the configuration activities/builders/admission.ts
// generates, run by Debian's nginx binary (as the local stack runs it) in front of an in-process engine stand-in whose
// requests last about a second, and the sidecar's reload loop (its container command) run with the local sh. Needs
// nothing running, only /usr/sbin/nginx (`bash deploy/local/install.sh nginx`; skipped without it, as the puller
// script's test is without python3). The box is a noisy 2-core machine: every bound is loose or relative, and the
// tests wait on conditions (a port answering, a worker replaced), never on fixed sleeps.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { admissionConfig, admissionContainer, type AdmissionConfigOptions } from '../../activities/builders/index.js';
import { createEngineSim, type EngineSim } from '../../deploy/engine-sim/server.js';
import { fixtureModel } from './fixtures.js';

const NGINX = '/usr/sbin/nginx';
/** 24 tokens, 50 ms apart: an admitted request streams for about 1.2 s. */
const TOKENS = 24;
const TOKEN_DELAY_MS = 50;
/** Every request ends within this, or the test fails instead of hanging. */
const REQUEST_BOUND_MS = 30_000;
/** A test's own bound: a few rounds of requests, reloads and process starts, on a loaded machine. */
const TEST_TIMEOUT_MS = 120_000;

let sim: EngineSim;
let enginePort: number;
const dirs: string[] = [];
const children: ChildProcess[] = [];

const haveNginx = existsSync(NGINX);
if (!haveNginx) console.warn(`skipping the nginx tests: ${NGINX} is missing (bash deploy/local/install.sh nginx)`);

beforeAll(async () => {
  if (!haveNginx) return;
  // Large enough that the engine never queues: only nginx decides who waits.
  sim = createEngineSim({ servedModelNames: ['qwen'], port: 0, loadDelaySeconds: 0, maxNumSeqs: 64, tokenDelayMs: 50 });
  ({ port: enginePort } = await sim.start());
});

afterAll(async () => {
  await sim?.stop();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

// Each child leads a process group of its own (spawned detached), so that nothing it started outlives the test: a
// sidecar's nginx, or an nginx worker whose master was killed (workers do not follow their master out).
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // Nothing of it is left.
  }
}

afterEach(async () => {
  const left = children.splice(0);
  for (const child of left) killGroup(child);
  await Promise.all(left.map((child) => exitOf(child)));
});
process.on('exit', () => children.forEach(killGroup));

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** Sends `signal` to the child alone (as the kubelet signals a container's first process) and waits for its exit. */
async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  const exited = exitOf(child);
  child.kill(signal);
  const timer = setTimeout(() => killGroup(child), 15_000);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `probe` every 20 ms until it returns something truthy, or fails after `timeoutMs`. */
async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (performance.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? ` (last: ${last.message})` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A prefix directory for one nginx: its pid file and temporary directories go there. */
function prefixDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-admission-'));
  // Started as root (as here), nginx runs its worker as nobody, which must reach the directories it creates there.
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return `${dir}/`;
}

function configFor(listenPort: number, maxConcurrency: number | undefined, clientRoutesOnly = false): string {
  const options: AdmissionConfigOptions = {
    listenPort,
    listenAddress: '127.0.0.1',
    enginePort,
    maxConcurrency,
    retryAfterSeconds: 3,
    clientRoutesOnly,
  };
  return admissionConfig(options);
}

/** Writes a file as the kubelet updates a ConfigMap volume: all at once (a rename), never half-written. */
function writeAtomically(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

interface Nginx {
  base: string;
  prefix: string;
  conf: string;
  process: ChildProcess;
  stderr: () => string;
}

function follow(child: ChildProcess): () => string {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  children.push(child);
  return () => stderr;
}

async function untilServing(base: string, child: ChildProcess, stderr: () => string): Promise<void> {
  await waitFor(`nginx to serve ${base}/health`, 20_000, async () => {
    if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${stderr()}`);
    return (await fetch(`${base}/health`, { signal: AbortSignal.timeout(2_000) })).status === 200;
  });
}

async function startNginx(maxConcurrency: number | undefined, clientRoutesOnly = false): Promise<Nginx> {
  const prefix = prefixDir();
  const port = await freePort();
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(conf, configFor(port, maxConcurrency, clientRoutesOnly));
  const process = spawn(NGINX, ['-p', prefix, '-c', conf, '-e', 'stderr', '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const stderr = follow(process);
  const base = `http://127.0.0.1:${port}`;
  await untilServing(base, process, stderr);
  return { base, prefix, conf, process, stderr };
}

/** The nginx processes whose parent is `parent` (Linux: from /proc): a master's workers, or the sidecar's master. */
function nginxChildren(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent && comm === 'nginx') pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** Once a reload has taken effect: the workers that ran the old configuration are gone, new ones run. */
async function untilWorkersReplaced(masterPid: number, old: number[]): Promise<void> {
  await waitFor('the old nginx workers to be replaced', 20_000, async () => {
    const now = nginxChildren(masterPid);
    return now.length > 0 && now.every((pid) => !old.includes(pid));
  });
}

interface Outcome {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** performance.now() when the first token arrived (200 only) and when the body ended. */
  firstTokenAt?: number;
  endedAt: number;
}

/**
 * One streaming completion through nginx, read to its end, on a connection of its own: as many clients at once as
 * requests, and none reusing a kept-alive connection a reload's old worker is just closing.
 */
function complete(base: string): Promise<Outcome> {
  const body = JSON.stringify({
    model: 'qwen',
    prompt: 'admit me',
    max_tokens: TOKENS,
    ignore_eos: true,
    stream: true,
  });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/v1/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(REQUEST_BOUND_MS),
      },
      (res) => {
        let text = '';
        let firstTokenAt: number | undefined;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (firstTokenAt === undefined && text.includes('"text"')) firstTokenAt = performance.now();
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text,
            firstTokenAt,
            endedAt: performance.now(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The token chunks of a streamed answer; throws unless it ends with [DONE]. */
function tokensOf(body: string): string[] {
  const events = body.split('\n\n').filter((event) => event !== '');
  if (events.at(-1) !== 'data: [DONE]') throw new Error(`the stream did not end with [DONE]: ${body.slice(-200)}`);
  return events
    .slice(0, -1)
    .map((event) => JSON.parse(event.slice('data: '.length)) as { choices: { text: string }[] })
    .map((chunk) => chunk.choices[0]?.text ?? '');
}

function expectTooManyRequests(outcome: Outcome, limit: number): void {
  expect(outcome.status).toBe(429);
  expect(outcome.headers['retry-after']).toBe('3');
  expect(outcome.headers['content-type']).toBe('application/json');
  expect(JSON.parse(outcome.body)).toEqual({
    error: {
      message: `This replica is at its measured capacity of ${limit} concurrent request${limit === 1 ? '' : 's'}. Retry after 3 seconds.`,
      type: 'TooManyRequests',
      param: null,
      code: 429,
    },
  });
}

/**
 * `count` completions at once: exactly `limit` are admitted and stream all their tokens to [DONE]; the rest get 429
 * at once, before any admitted one has ended. `whileFull` runs once the rejections are in, while the admitted ones
 * still stream.
 */
async function expectAdmitted(base: string, count: number, limit: number, whileFull?: () => Promise<void>) {
  const startedAt = performance.now();
  const pending = Array.from({ length: count }, () => complete(base));
  const settled: (Outcome | null)[] = [];
  // Marks each as settled (and its rejection as handled; Promise.all below rethrows it).
  pending.forEach((p, i) => {
    void p.then(
      (o) => void (settled[i] = o),
      () => void (settled[i] = null),
    );
  });
  // The rejections come at once; the admitted ones are still streaming meanwhile.
  await waitFor(`${count - limit} rejections`, REQUEST_BOUND_MS, async () => {
    const rejected = settled.filter((o) => o?.status === 429).length;
    return rejected >= count - limit || settled.filter((o) => o !== undefined).length === count;
  });
  let checkedAt = startedAt;
  if (whileFull) {
    await whileFull();
    checkedAt = performance.now();
  }
  const outcomes = await Promise.all(pending);
  const admitted = outcomes.filter((o) => o.status === 200);
  expect(outcomes.map((o) => o.status).sort()).toEqual([
    ...Array<number>(limit).fill(200),
    ...Array<number>(count - limit).fill(429),
  ]);
  for (const outcome of admitted) {
    expect(tokensOf(outcome.body)).toHaveLength(TOKENS);
    // Streamed, not buffered: the first token came long before the last.
    expect(outcome.endedAt - outcome.firstTokenAt!).toBeGreaterThan((TOKENS * TOKEN_DELAY_MS) / 2);
  }
  const firstEnd = Math.min(...admitted.map((o) => o.endedAt));
  const shortest = Math.min(...admitted.map((o) => o.endedAt - startedAt));
  for (const outcome of outcomes.filter((o) => o.status === 429)) {
    expectTooManyRequests(outcome, limit);
    // Turned away at once, not queued: well within the admitted requests' time.
    expect(outcome.endedAt).toBeLessThan(firstEnd);
    expect(outcome.endedAt - startedAt).toBeLessThan(shortest / 2);
  }
  // whileFull ran while the limit was full.
  expect(checkedAt).toBeLessThan(firstEnd);
}

describe.skipIf(!haveNginx)('the admission configuration in front of the engine stand-in', () => {
  it('passes nginx -t', () => {
    const prefix = prefixDir();
    for (const gate of [false, true]) {
      for (const limit of [8, 0, undefined]) {
        const conf = join(prefix, `nginx-${limit}-${gate}.conf`);
        writeFileSync(conf, configFor(18_080, limit, gate));
        const test = spawnSync(NGINX, ['-t', '-p', prefix, '-c', conf, '-e', 'stderr'], { encoding: 'utf8' });
        expect(test.status, test.stderr).toBe(0);
        expect(test.stderr).toContain('test is successful');
      }
    }
  });

  it(
    'as the gate, passes the inference routes on and refuses every other route, however it is spelled',
    async () => {
      const nginx = await startNginx(2, true);
      // node:http, not fetch: fetch would resolve the dot segments itself, and nginx must be the one to see them.
      const send = (method: string, path: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const { hostname, port } = new URL(nginx.base);
          const req = request({
            hostname,
            port,
            path,
            method,
            agent: false,
            signal: AbortSignal.timeout(REQUEST_BOUND_MS),
          });
          req.on('response', (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          req.end(method === 'POST' ? '{}' : undefined);
        });
      for (const path of ['/health', '/v1/models', '/version', '/metrics']) {
        expect((await send('GET', path)).status, path).toBe(200);
      }
      // Admin routes, and spellings nginx reads as them (percent-encoded, dot segments, doubled slashes).
      for (const path of [
        '/v1/load_lora_adapter',
        '/v1/unload_lora_adapter',
        '/scale_elastic_ep',
        '/pause',
        '/update_weights',
        '/collective_rpc',
        '/v1/%6Coad_lora_adapter',
        '/v1/completions/../load_lora_adapter',
        '//v1//load_lora_adapter',
        '/v1/completionsx',
        '/',
      ]) {
        const refused = await send('POST', path);
        expect(refused.status, path).toBe(403);
        expect(JSON.parse(refused.body)).toMatchObject({ error: { type: 'Forbidden', code: 403 } });
      }
      // Generation still goes through, and still under the limit.
      await expectAdmitted(nginx.base, 4, 2);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'admits the limit, turns the rest away with 429 and Retry-After, and keeps probes and the model list open',
    async () => {
      const nginx = await startNginx(2);
      await expectAdmitted(nginx.base, 5, 2, async () => {
        for (const path of ['/health', '/v1/models', '/version', '/metrics']) {
          const res = await fetch(`${nginx.base}${path}`, { signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
          expect(res.status, path).toBe(200);
          if (path === '/v1/models')
            expect(((await res.json()) as { data: { id: string }[] }).data[0]?.id).toBe('qwen');
          else await res.arrayBuffer();
        }
        // Still full: one more generation request is turned away.
        expectTooManyRequests(await complete(nginx.base), 2);
      });

      // A new limit in place: the file rewritten and nginx reloaded with the same prefix and file.
      const pid = nginx.process.pid!;
      const old = nginxChildren(pid);
      expect(old).toHaveLength(1);
      writeFileSync(nginx.conf, configFor(Number(new URL(nginx.base).port), 4));
      const reload = spawnSync(NGINX, ['-p', nginx.prefix, '-c', nginx.conf, '-e', 'stderr', '-s', 'reload'], {
        encoding: 'utf8',
      });
      expect(reload.status, reload.stderr).toBe(0);
      await untilWorkersReplaced(pid, old);
      await expectAdmitted(nginx.base, 6, 4);
      expect(nginx.process.exitCode).toBeNull();
      expect(nginx.stderr()).not.toMatch(/\[(emerg|alert|crit)\]/);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'sets no limit for 0 (no concurrency meets the goal) or before a measurement',
    async () => {
      for (const limit of [0, undefined]) {
        const nginx = await startNginx(limit);
        const outcomes = await Promise.all(Array.from({ length: 6 }, () => complete(nginx.base)));
        expect(outcomes.map((o) => o.status)).toEqual(Array<number>(6).fill(200));
        for (const outcome of outcomes) expect(tokensOf(outcome.body)).toHaveLength(TOKENS);
        await stop(nginx.process, 'SIGQUIT');
      }
    },
    TEST_TIMEOUT_MS,
  );
});

/**
 * The container runs `sh -c SCRIPT ferry-admission <file> <prefix>` with busybox's sh; here Debian's sh (dash, as
 * POSIX as busybox's), with Debian's nginx on PATH, and a prefix the command has to create.
 */
function runSidecar(script: string, name: string, conf: string, prefix: string): ChildProcess {
  return spawn('/bin/sh', ['-c', script, name, conf, join(prefix, 'run/')], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
    env: { ...process.env, PATH: `/usr/sbin:${process.env.PATH ?? '/usr/bin:/bin'}` },
  });
}

describe.skipIf(!haveNginx)("the sidecar's command", () => {
  it(
    'reloads nginx when the mounted file changes, keeps running on a bad file, and stops on SIGTERM',
    async () => {
      const [shell, flag, script, name] = admissionContainer(fixtureModel('minimal-hf')).command!;
      expect([shell, flag, name]).toEqual(['/bin/sh', '-c', 'ferry-admission']);
      const prefix = prefixDir();
      const port = await freePort();
      const conf = join(prefix, 'nginx.conf');
      writeFileSync(conf, configFor(port, 1));
      const sidecar = runSidecar(script!, name!, conf, prefix);
      const stderr = follow(sidecar);
      const base = `http://127.0.0.1:${port}`;
      await untilServing(base, sidecar, stderr);
      await expectAdmitted(base, 3, 1);

      const master = await waitFor('the nginx master', 10_000, async () => nginxChildren(sidecar.pid!)[0]);
      const old = nginxChildren(master);
      writeAtomically(conf, configFor(port, 3));
      await waitFor('the sidecar to notice the new file', 20_000, async () => stderr().includes('reloading nginx'));
      await untilWorkersReplaced(master, old);
      await expectAdmitted(base, 5, 3);

      // A file nginx refuses: said so, and the running configuration stays.
      const running = nginxChildren(master);
      writeAtomically(conf, 'events {');
      await waitFor('the sidecar to report the refusal', 20_000, async () => stderr().includes('nginx refused'));
      expect(nginxChildren(master)).toEqual(running);
      expect((await fetch(`${base}/health`, { signal: AbortSignal.timeout(REQUEST_BOUND_MS) })).status).toBe(200);

      // SIGTERM (the kubelet's stop) becomes nginx's graceful stop: a stream in flight ends whole, then the command
      // exits with nginx.
      const streaming = complete(base);
      await waitFor('a stream to start', REQUEST_BOUND_MS, async () => sim.state.metrics.requestsRunning > 0);
      const exited = stop(sidecar, 'SIGTERM');
      expect(tokensOf((await streaming).body)).toHaveLength(TOKENS);
      expect(await exited).toBe(0);
      expect(existsSync(`/proc/${master}`)).toBe(false);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'exits when nginx does, so the kubelet restarts the container',
    async () => {
      const [, , script, name] = admissionContainer(fixtureModel('minimal-hf')).command!;
      // nginx killed under it.
      const prefix = prefixDir();
      const port = await freePort();
      writeFileSync(join(prefix, 'nginx.conf'), configFor(port, 2));
      const sidecar = runSidecar(script!, name!, join(prefix, 'nginx.conf'), prefix);
      const stderr = follow(sidecar);
      await untilServing(`http://127.0.0.1:${port}`, sidecar, stderr);
      process.kill(nginxChildren(sidecar.pid!)[0]!, 'SIGKILL');
      expect(await exitOf(sidecar), stderr()).toBe(128 + 9);

      // nginx refusing its file at start.
      const broken = prefixDir();
      writeFileSync(join(broken, 'nginx.conf'), 'not a configuration;');
      const refused = runSidecar(script!, name!, join(broken, 'nginx.conf'), broken);
      const refusal = follow(refused);
      expect(await exitOf(refused), refusal()).toBe(1);
      expect(refusal()).toContain('[emerg]');
    },
    TEST_TIMEOUT_MS,
  );
});
