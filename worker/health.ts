// The worker's probe endpoints: GET /healthz (the process answers: liveness) and GET /readyz (the worker polls, and
// both Temporal and the Kubernetes API server answer it now: readiness). Each readiness check is bounded by a short
// deadline and its answer kept for a few seconds, so probes cannot load either server. Plain text, one line per check.
import { createServer, type Server } from 'node:http';

/** One dependency the worker needs: resolves when it answers, rejects (with why) when it does not. */
export type ReadinessCheck = () => Promise<void>;

export interface HealthServer {
  /** Where it listens, `host:port` (port 0 asked for any free port). */
  address: string;
  close(): Promise<void>;
}

const CHECK_TIMEOUT_MS = 2_000;
/** A check's answer is reused this long. */
const CHECK_CACHE_MS = 5_000;

export async function startHealthServer(
  address: string,
  checks: Record<string, ReadinessCheck>,
  now: () => number = Date.now,
): Promise<HealthServer> {
  const cache = new Map<string, { at: number; error?: string }>();
  const run = async (name: string, check: ReadinessCheck): Promise<string | undefined> => {
    const cached = cache.get(name);
    if (cached && now() - cached.at < CHECK_CACHE_MS) return cached.error;
    let timer: NodeJS.Timeout | undefined;
    const error = await Promise.race([
      check().then(() => undefined),
      new Promise<string>(
        (resolve) => (timer = setTimeout(() => resolve(`no answer within ${CHECK_TIMEOUT_MS} ms`), CHECK_TIMEOUT_MS)),
      ),
    ])
      .catch((err: unknown) => (err instanceof Error ? err.message : String(err)))
      .finally(() => clearTimeout(timer));
    cache.set(name, { at: now(), ...(error !== undefined ? { error } : {}) });
    return error;
  };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, body: string) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'GET only\n');
    if (path === '/healthz' || path === '/livez') return reply(200, 'ok\n');
    if (path !== '/readyz') return reply(404, 'not found: GET /healthz or /readyz\n');
    void Promise.all(Object.entries(checks).map(async ([name, check]) => [name, await run(name, check)] as const)).then(
      (results) => {
        const failed = results.filter(([, error]) => error !== undefined);
        const lines = results.map(([name, error]) => (error === undefined ? `ok ${name}` : `failed ${name}: ${error}`));
        reply(failed.length ? 503 : 200, `${lines.join('\n')}\n`);
      },
    );
  });
  const { host, port } = parseAddress(address);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = server.address();
  const boundPort = typeof bound === 'object' && bound ? bound.port : port;
  return {
    address: `${host}:${boundPort}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** `host:port`, `:port` or `port`; the host defaults to every interface. */
export function parseAddress(address: string): { host: string; port: number } {
  const match = /^(?:(.*):)?(\d{1,5})$/.exec(address.trim());
  const port = Number(match?.[2]);
  if (!match || port > 65_535) throw new Error(`${JSON.stringify(address)} is not host:port`);
  return { host: match[1] || '0.0.0.0', port };
}
