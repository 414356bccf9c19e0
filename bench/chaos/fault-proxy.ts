// A fault-injecting proxy between a Kubernetes client and the API server, for tests and chaos runs: plain HTTP on
// 127.0.0.1 without credentials (loopback only), forwarded over HTTPS with the given kubeconfig's client
// certificate, responses streamed (watches work through it). At a configurable rate it answers a request itself
// instead, with one fault drawn from a weighted mix: 429 with Retry-After, 500, 503, 409 (writes only), a connection
// reset before forwarding, a reset after forwarding (writes only: the write happened, its answer is lost), a hang
// (never answered), or a cut watch (a watch stream ended after a short random time). Seeded, so one request
// sequence meets the same faults; counts what it injected.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { mulberry32 } from '../lib.js';

export type FaultKind =
  'http429' | 'http500' | 'http503' | 'conflict409' | 'resetBefore' | 'resetAfter' | 'hang' | 'cutWatch';

const KINDS: readonly FaultKind[] = [
  'http429',
  'http500',
  'http503',
  'conflict409',
  'resetBefore',
  'resetAfter',
  'hang',
  'cutWatch',
];
/** Faults that only make sense for some requests. */
const WRITES_ONLY = new Set<FaultKind>(['conflict409', 'resetAfter']);
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Which requests a fault or an exemption applies to; every given field must match. */
export interface RequestMatch {
  method?: string;
  /** A prefix of the path, or a pattern tested against path and query. */
  path?: string | RegExp;
  watch?: boolean;
}

interface FaultSettings {
  /** The share of requests (0–1) answered with a fault. */
  rate: number;
  /** Relative weights of the faults drawn; only the kinds named are drawn (empty: all, equally). */
  mix: Partial<Record<FaultKind, number>>;
  /** Faults are injected only while this is true. */
  enabled: boolean;
  /** Requests never faulted (e.g. the namespace's own setup). */
  exempt: RequestMatch[];
}

export interface FaultProxyOptions extends Partial<FaultSettings> {
  /** Seed of the fault draws. */
  seed?: number;
  /** Retry-After of the injected 429s, in seconds. */
  retryAfterSeconds?: number;
  /** A cut watch ends after a time uniform in this range. */
  cutWatchMs?: [number, number];
  /**
   * Sends the API server's response headers only with the first byte of the body, as some proxies do (Node's own
   * http server, unless told to flush): a quiet watch then has no headers until its first event or bookmark.
   */
  holdHeaders?: boolean;
}

interface FaultCounts {
  requests: number;
  forwarded: number;
  injected: Record<FaultKind, number>;
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** A KubeConfig that talks to the proxy (no credentials: the proxy adds them). */
  kubeConfig(): KubeConfig;
  /** The same as a kubeconfig file, for a child process (a worker). */
  writeKubeconfig(dir?: string): string;
  /** Changes the rate, mix, exemptions or the on/off switch at run time. */
  set(settings: Partial<FaultSettings>): void;
  /**
   * Answers the next `times` requests matching `match` with fault `kind`, whatever the rate (exemptions apply).
   * Returns what ends it early.
   */
  script(kind: FaultKind, match?: RequestMatch, times?: number): () => void;
  counts(): FaultCounts;
  /**
   * Requests seen, newest last (`METHOD path?query`, what happened, and when: `at` on `performance.now()`'s clock),
   * for a test's assertions.
   */
  log(): { method: string; path: string; watch: boolean; at: number; fault?: FaultKind }[];
  close(): Promise<void>;
}

/** Starts the proxy in front of `kc`'s API server. */
export async function startFaultProxy(kc: KubeConfig, options: FaultProxyOptions = {}): Promise<FaultProxy> {
  const upstream = new URL(kc.getCurrentCluster()!.server);
  const tls: RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  const settings: FaultSettings = {
    rate: options.rate ?? 0,
    mix: options.mix ?? {},
    enabled: options.enabled ?? true,
    exempt: options.exempt ?? [],
  };
  const random = mulberry32(options.seed ?? 1);
  const retryAfter = String(options.retryAfterSeconds ?? 1);
  const [cutMin, cutMax] = options.cutWatchMs ?? [200, 2_000];
  const counts: FaultCounts = { requests: 0, forwarded: 0, injected: zeroCounts() };
  const scripted: { kind: FaultKind; match: RequestMatch; left: number }[] = [];
  const seen: ReturnType<FaultProxy['log']> = [];
  const sockets = new Set<Socket>();

  const choose = (req: Described): FaultKind | undefined => {
    if (settings.exempt.some((m) => matches(m, req))) return undefined;
    const planned = scripted.find((s) => s.left > 0 && matches(s.match, req));
    if (planned) {
      planned.left--;
      return planned.kind;
    }
    if (!settings.enabled || settings.rate <= 0 || random() >= settings.rate) return undefined;
    const named = Object.keys(settings.mix).length > 0;
    const fitting = KINDS.filter((k) => applies(k, req)).map((k) => [k, named ? (settings.mix[k] ?? 0) : 1] as const);
    const total = fitting.reduce((sum, [, w]) => sum + w, 0);
    if (total <= 0) return undefined;
    let draw = random() * total;
    for (const [kind, weight] of fitting) {
      draw -= weight;
      if (draw < 0) return kind;
    }
    return fitting.at(-1)![0];
  };

  const forward = (
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer,
    onResponse: (up: IncomingMessage) => void,
  ): void => {
    counts.forwarded++;
    const out = (upstream.protocol === 'https:' ? httpsRequest : httpRequest)(
      {
        ...tls,
        hostname: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        // The kubeconfig's own headers (a bearer token) go with it; the client sent none.
        headers: { ...req.headers, ...(tls.headers as Record<string, string> | undefined), host: upstream.host },
      },
      (up) => {
        // The client gone mid-answer (a watch it ended) aborts the upstream answer too: not an error of the proxy.
        up.on('error', () => res.destroy());
        onResponse(up);
      },
    );
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
    res.on('close', () => out.destroy());
    out.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const described = describe(req);
      counts.requests++;
      const fault = choose(described);
      seen.push({ ...described, at: performance.now(), ...(fault ? { fault } : {}) });
      if (fault) counts.injected[fault]++;
      switch (fault) {
        case undefined:
          return forward(req, res, body, (up) => pipeThrough(up, res, options.holdHeaders));
        case 'http429':
          return status(res, 429, 'TooManyRequests', 'too many requests, please try again later', {
            'retry-after': retryAfter,
          });
        case 'http500':
          return status(res, 500, 'InternalError', 'an error on the server has prevented the request from succeeding');
        case 'http503':
          return status(res, 503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
        case 'conflict409':
          return status(res, 409, 'Conflict', 'Operation cannot be fulfilled: the object has been modified');
        case 'resetBefore':
          return void req.socket.destroy();
        case 'resetAfter':
          return forward(req, res, body, (up) => {
            up.resume();
            up.on('end', () => req.socket.destroy());
          });
        case 'hang':
          // Held open without an answer until the client gives up or the proxy closes.
          return;
        case 'cutWatch':
          return forward(req, res, body, (up) => {
            pipeThrough(up, res, options.holdHeaders);
            const timer = setTimeout(() => req.socket.destroy(), cutMin + random() * (cutMax - cutMin));
            res.on('close', () => clearTimeout(timer));
          });
      }
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  const kubeConfig = () => {
    const proxied = new KubeConfig();
    proxied.loadFromOptions({
      clusters: [{ name: 'fault-proxy', server: url, skipTLSVerify: true }],
      users: [{ name: 'fault-proxy' }],
      contexts: [{ name: 'fault-proxy', cluster: 'fault-proxy', user: 'fault-proxy' }],
      currentContext: 'fault-proxy',
    });
    return proxied;
  };

  return {
    url,
    kubeConfig,
    writeKubeconfig: (dir = mkdtempSync(join(tmpdir(), 'ferry-fault-proxy-'))) => {
      const file = join(dir, 'kubeconfig');
      writeFileSync(file, kubeConfig().exportConfig());
      return file;
    },
    set: (changes) => Object.assign(settings, changes),
    script: (kind, match = {}, times = 1) => {
      const entry = { kind, match, left: times };
      scripted.push(entry);
      return () => void (entry.left = 0);
    },
    counts: () => ({ ...counts, injected: { ...counts.injected } }),
    log: () => [...seen],
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Described {
  method: string;
  /** Path and query. */
  path: string;
  watch: boolean;
}

function describe(req: IncomingMessage): Described {
  const url = new URL(req.url ?? '/', 'http://proxy');
  const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
  return { method: req.method ?? 'GET', path: `${url.pathname}${url.search}`, watch };
}

function applies(kind: FaultKind, req: Described): boolean {
  if (WRITES_ONLY.has(kind)) return WRITE_METHODS.has(req.method);
  if (kind === 'cutWatch') return req.watch;
  return true;
}

function matches(m: RequestMatch, req: Described): boolean {
  if (m.method !== undefined && m.method.toUpperCase() !== req.method) return false;
  if (m.watch !== undefined && m.watch !== req.watch) return false;
  if (m.path === undefined) return true;
  return typeof m.path === 'string' ? req.path.startsWith(m.path) : m.path.test(req.path);
}

function pipeThrough(up: IncomingMessage, res: ServerResponse, holdHeaders = false): void {
  res.writeHead(up.statusCode ?? 502, up.headers);
  // A watch's headers go out at once, as the API server sends them, unless the proxy plays one that holds them.
  if (!holdHeaders) res.flushHeaders();
  up.pipe(res);
}

function status(res: ServerResponse, code: number, reason: string, message: string, headers = {}): void {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `${message} (injected by the fault proxy)`,
    reason,
    code,
  });
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function zeroCounts(): Record<FaultKind, number> {
  return Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
}
