// The local Hub's front: a reverse proxy (node:http, streaming) in front of olah, which serves the local git
// repositories as a Hugging Face Hub mirror. It adds what tests need and olah lacks:
//
// - a count of the body bytes it served for file downloads (`/<org>/<name>/resolve/<revision>/<path>`, and the
//   `/datasets/…` and `/spaces/…` forms), per repository and file and in total, at `GET /_ferry/served`;
// - path prefixes, stripped before proxying, that shape the responses of one client only (the client puts the prefix
//   in its HF_ENDPOINT): `/_ferry/throttle/<bytesPerSecond>` paces every response body to that rate, and
//   `/_ferry/stall-after/<bytes>` sends each file download up to that many bytes into the file and then nothing more,
//   leaving the response open; `/_ferry/corrupt-at/<offset>` sends each file download with the byte at that offset of
//   the file changed, as a broken disk or network would. Prefixes chain: `/_ferry/throttle/65536/_ferry/stall-after/…`.
// - the same shaping for every download of one repository (for the S3 store: one bucket), set with
//   `PUT /_ferry/shape/<repository>?throttle=<bytesPerSecond>&stallAfter=<bytes>` and ended with `DELETE` of that path:
//   for clients whose requests are signed, path and all, so that they cannot carry a prefix.
// - Range for file downloads: olah sends a file from its git mirror whole whatever the Range, so the front answers a
//   `Range: bytes=N-` itself, as the Hub does (206 from N, the length from a HEAD), and counts only what it sends.
//
// Everything else passes unchanged (method, headers, status, body), except a redirect back to the Hub itself: olah
// (Starlette) answers with absolute Location URLs built from the request's Host, and they would drop the prefix, so
// such a Location is rewritten to the front's address with the prefix kept.
import {
  createServer,
  request as httpRequest,
  Agent,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RepoServed {
  /** Body bytes of successful (2xx) file downloads of the repository. */
  bytes: number;
  /** The same bytes per file path (as in the repository). */
  files: Record<string, number>;
  /** File download requests (GET), whatever their outcome. */
  requests: number;
}

export interface ServedCounts {
  /** The sum of every repository's bytes: what the front served as file downloads. */
  totalBytes: number;
  /** By repository: `org/name` for models, `datasets/org/name` and `spaces/org/name` for the others. */
  repos: Record<string, RepoServed>;
}

/** How the responses of one request are shaped, from the path's `/_ferry/…` prefixes. */
export interface Shaping {
  /** The prefixes as the client sent them, put back in front of rewritten redirects. */
  prefix: string;
  /** Pace every response body to this many bytes per second. */
  throttle?: number;
  /** Send each file download up to this offset of the file, then stop sending. */
  stallAfter?: number;
  /** Change the byte at this offset of each file download. */
  corruptAt?: number;
}

const PREFIX = /^\/_ferry\/(throttle|stall-after|corrupt-at)\/(\d+)(?=\/|$)/;

/** Strips the shaping prefixes off a request target (path and query); undefined: a malformed prefix. */
export function parseShaping(target: string): { shaping: Shaping; rest: string } | undefined {
  const shaping: Shaping = { prefix: '' };
  let rest = target;
  for (let m = PREFIX.exec(rest); m; m = PREFIX.exec(rest)) {
    const value = Number(m[2]);
    if (m[1] === 'throttle') {
      if (!(value > 0)) return undefined;
      shaping.throttle = value;
    } else if (m[1] === 'stall-after') {
      shaping.stallAfter = value;
    } else {
      shaping.corruptAt = value;
    }
    shaping.prefix += m[0];
    rest = rest.slice(m[0].length);
  }
  if (!rest.startsWith('/')) rest = `/${rest}`;
  return { shaping, rest };
}

const DOWNLOAD = /^\/(?:(datasets|spaces|models)\/)?(?:([^/]+)\/)?([^/]+)\/resolve\/([^/]+)\/(.+)$/;

const decode = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/** The repository and file of a file download path (no query), or undefined when the path is not one. */
export function parseDownload(pathname: string): { repo: string; file: string } | undefined {
  const m = DOWNLOAD.exec(pathname);
  if (!m) return undefined;
  const [, type, org, name, , file] = m;
  const id = org === undefined ? decode(name!) : `${decode(org)}/${decode(name!)}`;
  const repo = type === undefined || type === 'models' ? id : `${type}/${id}`;
  return { repo, file: file!.split('/').map(decode).join('/') };
}

/**
 * A Location that points back at the Hub (olah's own origin, the origin the client used, or a path on the same
 * origin) gets the client's origin and the shaping prefix; one that points elsewhere is left alone.
 */
export function rewriteLocation(
  location: string,
  options: { upstreamOrigin: string; clientOrigin: string; prefix: string },
): string {
  if (location.startsWith('/') && !location.startsWith('//')) return `${options.prefix}${location}`;
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    return location;
  }
  if (url.origin !== options.upstreamOrigin && url.origin !== options.clientOrigin) return location;
  return `${options.clientOrigin}${options.prefix}${url.pathname}${url.search}${url.hash}`;
}

// Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection; node:http writes its own.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function endToEnd<T>(headers: Record<string, T>): Record<string, T> {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
  );
  return Object.fromEntries(
    Object.entries(headers).filter(([k, v]) => v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)),
  );
}

export interface HubFrontOptions {
  /** olah's base URL, e.g. http://127.0.0.1:18090. */
  upstream: string;
  host: string;
  /** 0: any free port. */
  port: number;
  /** Called on proxy errors (upstream unreachable, a body cut short). */
  onError?: (msg: string, extra: Record<string, unknown>) => void;
  /** What a GET of this path downloads, to count; the Hub's file downloads unless told (the local S3 store's objects). */
  parseDownload?: (pathname: string) => { repo: string; file: string } | undefined;
}

export class HubFront {
  private readonly server: Server;
  private readonly upstream: URL;
  private readonly agent = new Agent({ keepAlive: true });
  private readonly counts: ServedCounts = { totalBytes: 0, repos: {} };
  /** Shaping set per repository (`PUT /_ferry/shape/<repository>`). */
  private readonly shapes = new Map<string, Omit<Shaping, 'prefix'>>();
  private address?: { host: string; port: number };

  constructor(private readonly options: HubFrontOptions) {
    this.upstream = new URL(options.upstream);
    this.server = createServer((req, res) => this.handle(req, res));
    // Downloads may be paced for minutes: no server-side timeouts.
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 60_000;
    this.server.keepAliveTimeout = 30_000;
  }

  async start(): Promise<{ host: string; port: number; url: string }> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const { port } = this.server.address() as AddressInfo;
    this.address = { host: this.options.host, port };
    return { host: this.options.host, port, url: this.url };
  }

  get url(): string {
    if (!this.address) throw new Error('the front is not listening');
    const { host, port } = this.address;
    return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  /** A copy of the counts, as `GET /_ferry/served` answers. */
  served(): ServedCounts {
    return structuredClone(this.counts);
  }

  /** Stops listening and drops every connection, stalled ones included. */
  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    this.agent.destroy();
    await closed;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const parsed = parseShaping(req.url ?? '/');
    if (!parsed) {
      this.json(res, 400, { error: `a malformed /_ferry/ prefix in ${req.url}` });
      return;
    }
    const { shaping, rest } = parsed;
    const pathname = rest.split('?')[0]!;
    if (pathname.startsWith('/_ferry/')) {
      if (pathname === '/_ferry/served' && (req.method === 'GET' || req.method === 'HEAD')) {
        this.json(res, 200, this.counts);
      } else if (pathname.startsWith('/_ferry/shape/') && (req.method === 'PUT' || req.method === 'DELETE')) {
        this.shape(req.method, decodeURIComponent(pathname.slice('/_ferry/shape/'.length)), rest, res);
      } else {
        this.json(res, 404, { error: `no such path: ${pathname}` });
      }
      return;
    }
    const download = req.method === 'GET' ? (this.options.parseDownload ?? parseDownload)(pathname) : undefined;
    if (download) {
      this.repo(download.repo).requests += 1;
      const set = this.shapes.get(download.repo);
      shaping.throttle ??= set?.throttle;
      shaping.stallAfter ??= set?.stallAfter;
    }

    const upstreamReq = this.upstreamRequest(req.method ?? 'GET', rest, endToEnd(req.headers));
    // The client went away (or a stall ended by the client): nothing more to fetch.
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    upstreamReq.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      this.options.onError?.('the upstream did not answer', { path: rest, error: String(err) });
      this.json(res, 502, { error: `the upstream did not answer: ${String(err)}` });
    });
    // The first byte a download asks for (`Range: bytes=<from>-`, as a client continuing a file sends it).
    const from = download ? openRangeStart(req.headers.range) : undefined;
    upstreamReq.on('response', (upstreamRes) => {
      void this.answer(req, res, upstreamRes, { rest, shaping, download, from }).catch((err: unknown) => {
        this.options.onError?.('a response was cut short', { path: rest, error: String(err) });
        upstreamRes.destroy();
        res.destroy();
      });
    });
    req.pipe(upstreamReq);
  }

  /** Sends the upstream's response on: a redirect rewritten, a Range the upstream ignored served from its 200. */
  private async answer(
    req: IncomingMessage,
    res: ServerResponse,
    upstreamRes: IncomingMessage,
    ctx: { rest: string; shaping: Shaping; download?: { repo: string; file: string }; from?: number },
  ): Promise<void> {
    const { rest, shaping, download } = ctx;
    let status = upstreamRes.statusCode ?? 502;
    const headers = endToEnd(upstreamRes.headers);
    const location = upstreamRes.headers.location;
    if (location !== undefined) {
      const clientOrigin = req.headers.host ? `http://${req.headers.host}` : this.url;
      headers.location = rewriteLocation(location, {
        upstreamOrigin: this.upstream.origin,
        clientOrigin,
        prefix: shaping.prefix,
      });
    }
    // olah ignores Range and answers 200 with the whole file: the front answers the range itself, as the Hub does
    // (206 from that offset), and counts only what it sends.
    let skip = 0;
    if (download && ctx.from && status === 200) {
      const total = Number(upstreamRes.headers['content-length'] ?? (await this.length(rest, req)));
      if (Number.isInteger(total) && total > 0) {
        if (ctx.from >= total) {
          upstreamRes.destroy();
          res.writeHead(416, { 'content-range': `bytes */${total}`, 'content-length': '0' });
          res.end();
          return;
        }
        delete headers['transfer-encoding'];
        Object.assign(headers, {
          'content-length': String(total - ctx.from),
          'content-range': `bytes ${ctx.from}-${total - 1}/${total}`,
        });
        status = 206;
        skip = ctx.from;
      }
    }
    res.writeHead(status, status === 206 && skip ? 'Partial Content' : upstreamRes.statusMessage, headers);
    const file = download && status >= 200 && status < 300 ? download : undefined;
    // The cut is at that offset of the file: a resumed download (a 206 from `start`) stalls there too, rather than
    // gaining that many more bytes at each attempt.
    const start = skip || (status === 206 ? rangeStart(upstreamRes.headers['content-range']) : 0);
    await this.pump(upstreamRes, res, {
      skip,
      throttle: shaping.throttle,
      stallAfter: file && shaping.stallAfter !== undefined ? Math.max(0, shaping.stallAfter - start) : undefined,
      corruptAt: file && shaping.corruptAt !== undefined ? shaping.corruptAt - start : undefined,
      count: file ? (n) => this.count(file.repo, file.file, n) : undefined,
    });
  }

  /** The length of a file, from a HEAD of it upstream (olah sends its downloads chunked, with no length). */
  private length(rest: string, req: IncomingMessage): Promise<string | undefined> {
    const { range: _range, ...headers } = endToEnd(req.headers);
    return new Promise((resolve) => {
      const head = this.upstreamRequest('HEAD', rest, headers);
      head.on('response', (r) => {
        r.resume();
        resolve(r.statusCode === 200 ? r.headers['content-length'] : undefined);
      });
      head.on('error', () => resolve(undefined));
      head.end();
    });
  }

  private upstreamRequest(method: string, path: string, headers: Record<string, string | string[] | undefined>) {
    const { protocol, hostname, port } = this.upstream;
    return httpRequest({ protocol, hostname, port, method, path, headers, agent: this.agent });
  }

  /** Copies a body to the client with backpressure, paced and cut as asked, counting what it writes. */
  private async pump(
    from: IncomingMessage,
    to: ServerResponse,
    shape: { skip?: number; throttle?: number; stallAfter?: number; corruptAt?: number; count?: (n: number) => void },
  ): Promise<void> {
    const closed = new AbortController();
    to.once('close', () => closed.abort());
    const started = performance.now();
    // Small slices when paced, so that the rate holds within a fraction of a second.
    const slice = shape.throttle ? Math.max(1024, Math.floor(shape.throttle / 20)) : Infinity;
    let sent = 0;
    const stall = () => {
      // The body stops here: no more reads from the Hub, and the response stays open until the client goes.
      from.destroy();
      to.flushHeaders();
    };
    if (shape.stallAfter === 0) return stall();
    try {
      let skip = shape.skip ?? 0;
      for await (const chunk of from) {
        let buf = chunk as Buffer;
        // The bytes before a range the upstream sent anyway: not the client's.
        const dropped = Math.min(skip, buf.length);
        buf = buf.subarray(dropped);
        skip -= dropped;
        while (buf.length > 0) {
          if (closed.signal.aborted) return;
          // A file of exactly that size ends normally; a longer one stalls when its next bytes arrive.
          if (shape.stallAfter !== undefined && sent >= shape.stallAfter) return stall();
          let n = Math.min(buf.length, slice);
          if (shape.stallAfter !== undefined) n = Math.min(n, shape.stallAfter - sent);
          let piece = buf.subarray(0, n);
          buf = buf.subarray(n);
          const at = shape.corruptAt === undefined ? -1 : shape.corruptAt - sent;
          if (at >= 0 && at < n) {
            piece = Buffer.from(piece);
            piece[at] = piece[at]! ^ 0xff;
          }
          sent += n;
          shape.count?.(n);
          if (!to.write(piece)) await drained(to, closed.signal);
          if (shape.throttle) {
            const due = started + (sent / shape.throttle) * 1000 - performance.now();
            if (due > 0) await sleep(due, undefined, { signal: closed.signal });
          }
        }
      }
    } catch (err) {
      if (closed.signal.aborted) return;
      throw err;
    }
    if (!closed.signal.aborted) to.end();
  }

  private shape(method: string, repo: string, target: string, res: ServerResponse): void {
    if (method === 'DELETE') {
      this.shapes.delete(repo);
      this.json(res, 200, { repo, shaping: null });
      return;
    }
    const query = new URLSearchParams(target.split('?')[1] ?? '');
    const number = (name: string) => (query.has(name) ? Number(query.get(name)) : undefined);
    const set = { throttle: number('throttle'), stallAfter: number('stallAfter') };
    if (!repo || Object.values(set).some((v) => v !== undefined && !(Number.isInteger(v) && v >= 0))) {
      this.json(res, 400, { error: 'PUT /_ferry/shape/<repository>?throttle=<bytes per second>&stallAfter=<bytes>' });
      return;
    }
    this.shapes.set(repo, set);
    this.json(res, 200, { repo, shaping: set });
  }

  private repo(name: string): RepoServed {
    return (this.counts.repos[name] ??= { bytes: 0, files: {}, requests: 0 });
  }

  private count(repo: string, file: string, n: number): void {
    const served = this.repo(repo);
    served.bytes += n;
    served.files[file] = (served.files[file] ?? 0) + n;
    this.counts.totalBytes += n;
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

/** N of a `Range: bytes=N-` header (the only form pullers send); undefined for any other. */
function openRangeStart(header: string | undefined): number | undefined {
  const m = /^bytes=(\d+)-$/.exec(header?.trim() ?? '');
  return m ? Number(m[1]) : undefined;
}

/** The first byte's offset in a `Content-Range: bytes <start>-<end>/<size>` (0 when absent or malformed). */
function rangeStart(header: string | undefined): number {
  const m = /^bytes (\d+)-/.exec(header ?? '');
  return m ? Number(m[1]) : 0;
}

function drained(stream: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    stream.on('drain', done);
    signal.addEventListener('abort', done);
  });
}
