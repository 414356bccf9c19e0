// The local Hub, one component of the local stack: olah (PyPI's Hugging Face Hub mirror, serving the git repositories
// that install.sh builds, offline) on a free loopback port, and the front (front.ts) where pods reach it.
//
//   FERRY_HUB_OLAH=<olah-cli> FERRY_HUB_MIRRORS=<dir> FERRY_HUB_STATE=<dir> FERRY_HUB_LISTEN=10.245.0.1:16447 \
//     node --import tsx deploy/local/hub/main.ts
//
// FERRY_HUB_MIRRORS holds the repositories as olah's mirrors-path wants them (models/<org>/<name>, git). In
// FERRY_HUB_STATE: olah.toml (olah's config), repos/ (its cache), olah.log (everything olah printed) and logs/ (olah's
// own rotating log). Logs JSON lines to stderr; "hub ready" (with the front's URL) once both answer. SIGTERM or SIGINT
// stops olah and exits 0; if olah exits on its own, so does this, non-zero, with olah's last lines.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { component, freePort } from '../component.js';
import { HubFront } from './front.js';

const { log, fail, env } = component('hub');

/** `host:port`, `[v6]:port`. */
function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(text);
  const port = Number(m?.[3]);
  if (!m || !(port >= 0 && port < 65536)) return fail(`FERRY_HUB_LISTEN must be host:port, not '${text}'`);
  return { host: m[1] ?? m[2]!, port };
}

const toml = (s: string) => JSON.stringify(s);

const olahCli = env('FERRY_HUB_OLAH');
const mirrors = resolve(env('FERRY_HUB_MIRRORS'));
const state = resolve(env('FERRY_HUB_STATE'));
const listen = parseListen(env('FERRY_HUB_LISTEN'));

mkdirSync(join(state, 'repos'), { recursive: true });
const olahPort = await freePort();
const config = join(state, 'olah.toml');
writeFileSync(
  config,
  [
    '# Written by deploy/local/hub/main.ts at each start.',
    '[basic]',
    'host = "127.0.0.1"',
    `port = ${olahPort}`,
    `repos-path = ${toml(join(state, 'repos'))}`,
    `mirrors-path = [${toml(mirrors)}]`,
    '[accessibility]',
    'offline = true',
    '',
  ].join('\n'),
);

// What olah printed, for its own log file and, should it exit, the last lines for ours.
const tail: string[] = [];
const output = createWriteStream(join(state, 'olah.log'), { flags: 'a' });
const keep = (chunk: Buffer) => {
  output.write(chunk);
  const lines = chunk.toString('utf8').split('\n').filter(Boolean);
  tail.push(...lines);
  tail.splice(0, Math.max(0, tail.length - 30));
};

let stopping = false;
const upstream = `http://127.0.0.1:${olahPort}`;
const front = new HubFront({
  upstream,
  host: listen.host,
  port: listen.port,
  onError: (msg, extra) => log(msg, extra),
});
const shutdown = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  log(`${signal} received, stopping olah`);
  olah.kill('SIGTERM');
  const killer = setTimeout(() => olah.kill('SIGKILL'), 5_000);
  void Promise.all([front.stop(), exited]).finally(() => {
    clearTimeout(killer);
    output.end(() => process.exit(0));
  });
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

const olah: ChildProcess = spawn(olahCli, ['-c', config, '--log-path', join(state, 'logs')], {
  cwd: state,
  env: { ...process.env, PYTHONUNBUFFERED: '1' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
olah.stdout!.on('data', keep);
olah.stderr!.on('data', keep);
const exited = new Promise<void>((done) => {
  olah.once('error', (err) => {
    if (!stopping) fail('olah did not start', { olah: olahCli, error: String(err) });
    done();
  });
  olah.once('exit', (code, signal) => {
    if (!stopping) fail('olah exited', { code, signal, log: join(state, 'olah.log'), lastLines: tail });
    done();
  });
});
log('olah starting', { olah: olahCli, port: olahPort, mirrors, state, pid: olah.pid });

const deadline = Date.now() + 60_000;
for (;;) {
  // Any HTTP answer will do: olah listens once its app has started. Not `/`: olah 0.5.4's index page fails (a
  // Jinja2 TypeError, a traceback in its log); a one-segment path no route takes gets a clean 404 (two segments
  // would be a CDN file request, which makes a cache directory).
  const answered = await fetch(`${upstream}/_ferry-probe`, { signal: AbortSignal.timeout(2_000) }).then(
    async (res) => (await res.arrayBuffer(), true),
    () => false,
  );
  if (answered) break;
  if (Date.now() > deadline) {
    stopping = true;
    olah.kill('SIGKILL');
    fail('olah did not answer within 60s', { url: upstream, lastLines: tail });
  }
  await sleep(200);
}

let url = '';
try {
  ({ url } = await front.start());
} catch (err) {
  stopping = true;
  olah.kill('SIGTERM');
  await exited;
  fail('the front cannot listen', { listen: `${listen.host}:${listen.port}`, error: String(err) });
}

log('hub ready', { url });
