// What the local stack's own components (hub/main.ts, s3/main.ts, registry/main.ts) share: JSON log lines to stderr,
// a failure that exits, required environment, a free loopback port, and a server run behind the Hub's front.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { HubFront, type HubFrontOptions } from './hub/front.js';

export interface Component {
  log: (msg: string, extra?: Record<string, unknown>) => void;
  /** Logs and exits non-zero. */
  fail: (msg: string, extra?: Record<string, unknown>) => never;
  /** A required environment variable; a missing or empty one fails. */
  env: (name: string) => string;
}

export function component(name: string): Component {
  const log = (msg: string, extra: Record<string, unknown> = {}) =>
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), component: name, msg, ...extra })}\n`);
  const fail = (msg: string, extra: Record<string, unknown> = {}): never => {
    log(msg, extra);
    process.exit(1);
  };
  return { log, fail, env: (variable) => process.env[variable] || fail(`${variable} is not set`) };
}

/** A port no one listens on at 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done, reject) => server.once('error', reject).listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

/** The NAME=value lines of a file of the local stack's (its components' credentials.env). */
export function readEnvFile(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** A server this component runs as a child, behind a front (hub/front.ts) on `listen` (host:port). */
export interface Fronted {
  front: HubFront;
  /** The server's own last lines, for a failure's message. */
  tail: string[];
}

/**
 * Starts `command` (its environment only `env` and PATH: secrets go there, never in `args`) and a front on `listen`
 * for `upstream`, not yet listening; the component fails if the server exits, and SIGTERM or SIGINT stops both.
 */
export function fronted(
  self: Component,
  server: { name: string; command: string; args: string[]; env: Record<string, string> },
  front: { upstream: string; listen: string; parseDownload: HubFrontOptions['parseDownload'] },
): Fronted {
  const tail: string[] = [];
  let stopping = false;
  const child: ChildProcess = spawn(server.command, server.args, {
    env: { PATH: process.env.PATH ?? '', ...server.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = (chunk: Buffer) => {
    tail.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 30));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.once('exit', (code, signal) => {
    if (!stopping) self.fail(`${server.name} exited`, { code, signal, lastLines: tail });
  });
  const [host, port] = front.listen.split(':');
  const hubFront = new HubFront({
    upstream: front.upstream,
    host: host!,
    port: Number(port),
    onError: (msg, extra) => self.log(msg, extra),
    parseDownload: front.parseDownload,
  });
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    child.kill('SIGTERM');
    void hubFront.stop().finally(() => process.exit(0));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  return { front: hubFront, tail };
}
