// What the local stack's own components (hub/main.ts, s3/main.ts) share: JSON log lines to stderr, a failure that
// exits, required environment and a free loopback port for the server each one fronts.
import { createServer } from 'node:net';

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
