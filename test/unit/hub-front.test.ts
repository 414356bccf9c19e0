// The local Hub's front against a fake upstream (node:http) standing for olah: what it counts, the /_ferry/ prefixes
// it strips, how it paces, stalls and streams bodies, and the redirects it rewrites.
import { once } from 'node:events';
import { createServer, get, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HubFront,
  parseDownload,
  parseShaping,
  rewriteLocation,
  type ServedCounts,
} from '../../deploy/local/hub/front.js';

const FILE_SIZE = 1024 * 1024;
/** A deterministic file body: byte i is i mod 251, so a cut or a misplaced range shows. */
const fileBytes = Buffer.from(Array.from({ length: FILE_SIZE }, (_, i) => i % 251));

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
const seen: Seen[] = [];
/** Released by the streaming test: until then /gated sends only its first chunk. */
let releaseGate: () => void = () => undefined;
let gateSentAll = false;
let upstreamClosed = 0;

function upstreamHandler(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const url = req.url ?? '/';
    seen.push({ method: req.method ?? '', url, headers: req.headers, body: Buffer.concat(chunks).toString() });
    res.on('close', () => {
      if (!res.writableFinished) upstreamClosed += 1;
    });
    const path = url.split('?')[0]!;
    if (path === '/ferry-local/endless/resolve/main/model.safetensors') {
      // A body without end, until the reader goes away.
      res.writeHead(200);
      const timer = setInterval(() => res.write(Buffer.alloc(65536, 3)), 10);
      res.on('close', () => clearInterval(timer));
      return;
    }
    if (/^\/(datasets\/|models\/)?ferry-local\/[^/]+\/resolve\/[^/]+\/(.+)$/.test(path)) {
      if (path.includes('missing')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Entry not found"}');
        return;
      }
      if (path.includes('/norange/') && req.method === 'GET') {
        // As olah sends a file from its git mirror: the whole of it, whatever the Range, chunked with no length.
        res.writeHead(200, { etag: '"abc"' });
        res.end(fileBytes);
        return;
      }
      const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      const start = range ? Number(range[1]) : 0;
      const body = fileBytes.subarray(start);
      res.writeHead(range ? 206 : 200, {
        'content-length': body.length,
        etag: '"abc"',
        ...(range ? { 'content-range': `bytes ${start}-${FILE_SIZE - 1}/${FILE_SIZE}` } : {}),
      });
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      // In 64 KiB writes, as a file server sends a large file.
      let at = 0;
      const more = () => {
        while (at < body.length) {
          const ok = res.write(body.subarray(at, at + 65536));
          at += 65536;
          if (!ok) return void res.once('drain', more);
        }
        res.end();
      };
      more();
      return;
    }
    if (path === '/gated') {
      res.writeHead(200, { 'content-length': 2 * 65536 });
      res.write(Buffer.alloc(65536, 1));
      releaseGate = () => {
        gateSentAll = true;
        res.end(Buffer.alloc(65536, 2));
      };
      return;
    }
    if (path === '/api/models/ferry-local/tiny/tree/main') {
      // As Starlette's redirect_slashes does: absolute, from the request's Host.
      res.writeHead(307, {
        location: `http://${req.headers.host}/api/models/ferry-local/tiny/tree/main/?recursive=true`,
      });
      res.end();
      return;
    }
    if (path === '/redirect-elsewhere') {
      res.writeHead(302, { location: 'https://cdn.example.com/x' }).end();
      return;
    }
    if (path === '/teapot') {
      res.writeHead(418, 'Short And Stout', { 'x-upstream': 'yes', 'set-cookie': ['a=1', 'b=2'] }).end('tea');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ method: req.method, url }));
  });
}

let upstream: Server;
let front: HubFront;
let base: string;

beforeAll(async () => {
  upstream = createServer(upstreamHandler);
  await new Promise<void>((done) => upstream.listen(0, '127.0.0.1', done));
  const { port } = upstream.address() as AddressInfo;
  front = new HubFront({ upstream: `http://127.0.0.1:${port}`, host: '127.0.0.1', port: 0 });
  ({ url: base } = await front.start());
});
afterAll(async () => {
  await front.stop();
  upstream.closeAllConnections();
  await new Promise((done) => upstream.close(done));
});

/** A whole response over node:http (no redirects followed, nothing decoded). */
function fetchRaw(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; statusMessage: string; headers: IncomingMessage['headers']; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          statusMessage: res.statusMessage!,
          headers: res.headers,
          body: Buffer.concat(chunks),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const served = async () => (await (await fetch(`${base}/_ferry/served`)).json()) as ServedCounts;

describe('the pure parts', () => {
  it('strips chained shaping prefixes and rejects malformed ones', () => {
    expect(parseShaping('/ferry-local/x/resolve/main/a.bin?x=1')).toEqual({
      shaping: { prefix: '' },
      rest: '/ferry-local/x/resolve/main/a.bin?x=1',
    });
    expect(parseShaping('/_ferry/throttle/65536/_ferry/stall-after/100/api/models/x/y')).toEqual({
      shaping: { prefix: '/_ferry/throttle/65536/_ferry/stall-after/100', throttle: 65536, stallAfter: 100 },
      rest: '/api/models/x/y',
    });
    expect(parseShaping('/_ferry/throttle/0/x')).toBeUndefined();
    // Not a prefix: passes through (and the front answers 404 for an unknown /_ferry/ path).
    expect(parseShaping('/_ferry/throttle/fast/x')?.rest).toBe('/_ferry/throttle/fast/x');
  });

  it('knows the download paths: models with or without an org or a type, datasets, nested and escaped files', () => {
    expect(parseDownload('/ferry-local/tiny-llama/resolve/v1/model.safetensors')).toEqual({
      repo: 'ferry-local/tiny-llama',
      file: 'model.safetensors',
    });
    expect(parseDownload('/models/ferry-local/tiny-llama/resolve/main/onnx/model%20a.onnx')).toEqual({
      repo: 'ferry-local/tiny-llama',
      file: 'onnx/model a.onnx',
    });
    expect(parseDownload('/datasets/ferry-local/rows/resolve/refs%2Fpr%2F1/data.csv')).toEqual({
      repo: 'datasets/ferry-local/rows',
      file: 'data.csv',
    });
    expect(parseDownload('/gpt2/resolve/main/config.json')).toEqual({ repo: 'gpt2', file: 'config.json' });
    expect(parseDownload('/api/models/ferry-local/tiny-llama/revision/main')).toBeUndefined();
    expect(parseDownload('/api/models/ferry-local/tiny-llama/tree/main/')).toBeUndefined();
  });

  it('rewrites redirects back to the Hub, keeping the prefix, and leaves others alone', () => {
    const options = {
      upstreamOrigin: 'http://127.0.0.1:5000',
      clientOrigin: 'http://10.245.0.1:16447',
      prefix: '/_ferry/throttle/10',
    };
    expect(rewriteLocation('http://127.0.0.1:5000/a/b?c=1', options)).toBe(
      'http://10.245.0.1:16447/_ferry/throttle/10/a/b?c=1',
    );
    expect(rewriteLocation('http://10.245.0.1:16447/a/', options)).toBe(
      'http://10.245.0.1:16447/_ferry/throttle/10/a/',
    );
    expect(rewriteLocation('/a/b', options)).toBe('/_ferry/throttle/10/a/b');
    expect(rewriteLocation('https://cdn.example.com/x', options)).toBe('https://cdn.example.com/x');
    expect(rewriteLocation('//cdn.example.com/x', options)).toBe('//cdn.example.com/x');
  });
});

describe('the front', () => {
  it('counts the bytes of file downloads per repository and file, and requests; not HEADs nor API calls', async () => {
    const before = await served();
    const file = `${base}/ferry-local/tiny/resolve/main/model.safetensors`;
    expect((await fetchRaw(file)).body.equals(fileBytes)).toBe(true);
    expect((await fetchRaw(`${base}/models/ferry-local/tiny/resolve/main/sub/dir/a.bin`)).body.length).toBe(FILE_SIZE);
    expect((await fetchRaw(file, { method: 'HEAD' })).headers['content-length']).toBe(String(FILE_SIZE));
    expect((await fetchRaw(`${base}/ferry-local/tiny/resolve/main/missing.bin`)).status).toBe(404);
    await fetchRaw(`${base}/api/models/ferry-local/tiny/revision/main`);
    await fetchRaw(`${base}/datasets/ferry-local/rows/resolve/main/data.csv`);
    const after = await served();
    expect(front.served()).toEqual(after);

    const tiny = after.repos['ferry-local/tiny']!;
    const was = before.repos['ferry-local/tiny'] ?? { bytes: 0, files: {}, requests: 0 };
    expect(tiny.bytes - was.bytes).toBe(2 * FILE_SIZE);
    expect(tiny.files['model.safetensors']! - (was.files['model.safetensors'] ?? 0)).toBe(FILE_SIZE);
    expect(tiny.files['sub/dir/a.bin']! - (was.files['sub/dir/a.bin'] ?? 0)).toBe(FILE_SIZE);
    expect(tiny.files['missing.bin']).toBeUndefined();
    expect(tiny.requests - was.requests).toBe(3);
    expect(after.repos['datasets/ferry-local/rows']!.files['data.csv']).toBeGreaterThanOrEqual(FILE_SIZE);
    expect(after.totalBytes - before.totalBytes).toBe(3 * FILE_SIZE);
    const sum = Object.values(after.repos as Record<string, { bytes: number }>).reduce((n, r) => n + r.bytes, 0);
    expect(after.totalBytes).toBe(sum);
  });

  it('strips the prefixes before proxying and keeps the method, headers, body and status', async () => {
    const echo = await fetchRaw(`${base}/_ferry/throttle/10000000/_ferry/stall-after/5/api/echo?q=1`, {
      method: 'POST',
      headers: { authorization: 'Bearer t', 'x-custom': 'v', 'content-type': 'application/json' },
      body: '{"paths":["a"]}',
    });
    expect(JSON.parse(echo.body.toString())).toEqual({ method: 'POST', url: '/api/echo?q=1' });
    const got = seen.at(-1)!;
    expect(got.headers.authorization).toBe('Bearer t');
    expect(got.headers['x-custom']).toBe('v');
    expect(got.body).toBe('{"paths":["a"]}');

    const tea = await fetchRaw(`${base}/_ferry/throttle/100000/teapot`);
    expect([tea.status, tea.statusMessage, tea.body.toString()]).toEqual([418, 'Short And Stout', 'tea']);
    expect(tea.headers['x-upstream']).toBe('yes');
    expect(tea.headers['set-cookie']).toEqual(['a=1', 'b=2']);

    // The served counts are reachable behind a prefix too; an unknown /_ferry/ path is not proxied.
    expect((await fetchRaw(`${base}/_ferry/throttle/100000/_ferry/served`)).status).toBe(200);
    expect((await fetchRaw(`${base}/_ferry/nothing`)).status).toBe(404);
    expect((await fetchRaw(`${base}/_ferry/throttle/0/x`)).status).toBe(400);
  });

  it('rewrites a redirect back to the Hub to the front with the prefix; leaves one elsewhere', async () => {
    const tree = await fetchRaw(`${base}/_ferry/throttle/100000/api/models/ferry-local/tiny/tree/main?recursive=true`);
    expect(tree.status).toBe(307);
    expect(tree.headers.location).toBe(
      `${base}/_ferry/throttle/100000/api/models/ferry-local/tiny/tree/main/?recursive=true`,
    );
    const plain = await fetchRaw(`${base}/api/models/ferry-local/tiny/tree/main`);
    expect(plain.headers.location).toBe(`${base}/api/models/ferry-local/tiny/tree/main/?recursive=true`);
    expect((await fetchRaw(`${base}/redirect-elsewhere`)).headers.location).toBe('https://cdn.example.com/x');
  });

  it('paces a body to the throttle rate', async () => {
    const rate = 512 * 1024;
    const started = performance.now();
    const res = await fetchRaw(`${base}/_ferry/throttle/${rate}/ferry-local/slow/resolve/main/model.safetensors`);
    const seconds = (performance.now() - started) / 1000;
    expect(res.body.equals(fileBytes)).toBe(true);
    // 1 MiB at 512 KiB/s: 2 s; a wide margin for a loaded machine, but far from unthrottled (milliseconds).
    expect(seconds).toBeGreaterThan(1.6);
    expect(seconds).toBeLessThan(6);
    expect((await served()).repos['ferry-local/slow']!.bytes).toBe(FILE_SIZE);
  });

  it('paces every download of one repository set by PUT /_ferry/shape, until DELETE; others run free', async () => {
    const rate = 1024 * 1024;
    const set = await fetchRaw(`${base}/_ferry/shape/ferry-local%2Fshaped?throttle=${rate}`, { method: 'PUT' });
    expect(set.status).toBe(200);
    expect((await fetchRaw(`${base}/_ferry/shape/x?throttle=-1`, { method: 'PUT' })).status).toBe(400);
    const timed = async (repo: string) => {
      const started = performance.now();
      const res = await fetchRaw(`${base}/${repo}/resolve/main/model.safetensors`);
      expect(res.body.equals(fileBytes)).toBe(true);
      return (performance.now() - started) / 1000;
    };
    // 1 MiB at 1 MiB/s: about a second; unshaped, milliseconds.
    expect(await timed('ferry-local/shaped')).toBeGreaterThan(0.8);
    expect(await timed('ferry-local/free')).toBeLessThan(0.5);
    expect((await fetchRaw(`${base}/_ferry/shape/ferry-local%2Fshaped`, { method: 'DELETE' })).status).toBe(200);
    expect(await timed('ferry-local/shaped')).toBeLessThan(0.5);
  });

  it('changes the byte at the corrupt-at offset of the file, in a whole download and in a resumed one', async () => {
    const at = 70_000;
    const whole = await fetchRaw(`${base}/_ferry/corrupt-at/${at}/ferry-local/bad/resolve/main/model.safetensors`);
    expect(whole.body.length).toBe(FILE_SIZE);
    const differ = [...whole.body.keys()].filter((i) => whole.body[i] !== fileBytes[i]);
    expect(differ).toEqual([at]);
    const resumed = await fetchRaw(`${base}/_ferry/corrupt-at/${at}/ferry-local/bad/resolve/main/model.safetensors`, {
      headers: { range: 'bytes=65536-' },
    });
    expect(resumed.status).toBe(206);
    const tail = fileBytes.subarray(65536);
    expect([...resumed.body.keys()].filter((i) => resumed.body[i] !== tail[i])).toEqual([at - 65536]);
  });

  it('answers a Range itself when the upstream sends the whole file, counting only what it sends', async () => {
    const file = `${base}/_ferry/corrupt-at/70000/ferry-local/norange/resolve/main/model.safetensors`;
    const resumed = await fetchRaw(file, { headers: { range: 'bytes=65536-' } });
    expect(resumed.status).toBe(206);
    expect(resumed.headers['content-range']).toBe(`bytes 65536-${FILE_SIZE - 1}/${FILE_SIZE}`);
    expect(resumed.headers['content-length']).toBe(String(FILE_SIZE - 65536));
    const tail = fileBytes.subarray(65536);
    // The corrupt-at offset is of the file, as for an upstream that answers the range.
    expect([...resumed.body.keys()].filter((i) => resumed.body[i] !== tail[i])).toEqual([70000 - 65536]);
    expect((await served()).repos['ferry-local/norange']?.bytes).toBe(FILE_SIZE - 65536);

    const whole = await fetchRaw(file.replace('/_ferry/corrupt-at/70000', ''));
    expect(whole.status).toBe(200);
    expect(whole.body.equals(fileBytes)).toBe(true);
    const beyond = await fetchRaw(file, { headers: { range: `bytes=${FILE_SIZE}-` } });
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe(`bytes */${FILE_SIZE}`);
  });

  it('stalls a file download after N bytes: the body stops there, open, and the request is counted', async () => {
    const n = 100_000;
    const closedBefore = upstreamClosed;
    const req = get(`${base}/_ferry/stall-after/${n}/ferry-local/stalled/resolve/main/model.safetensors`);
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(FILE_SIZE));
    let received = 0;
    let ended = false;
    const body: Buffer[] = [];
    res.on('data', (c: Buffer) => {
      received += c.length;
      body.push(c);
    });
    res.on('end', () => (ended = true));
    res.on('error', () => undefined);
    const deadline = Date.now() + 5_000;
    while (received < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 700));
    expect(received).toBe(n);
    expect(ended).toBe(false);
    expect(Buffer.concat(body).equals(fileBytes.subarray(0, n))).toBe(true);
    const counts = (await served()).repos['ferry-local/stalled'];
    expect(counts).toEqual({ bytes: n, files: { 'model.safetensors': n }, requests: 1 });
    req.destroy();

    // Once stalled, the front reads no more from the upstream: it lets go of the upstream's response.
    const endless = get(`${base}/_ferry/stall-after/${n}/ferry-local/endless/resolve/main/model.safetensors`);
    endless.on('error', () => undefined);
    await once(endless, 'response');
    const until = Date.now() + 5_000;
    while (upstreamClosed === closedBefore && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(upstreamClosed).toBeGreaterThan(closedBefore);
    endless.destroy();

    // API responses are not cut; a file smaller than N ends normally.
    const api = await fetchRaw(`${base}/_ferry/stall-after/3/api/models/ferry-local/stalled/revision/main`);
    expect(JSON.parse(api.body.toString()).url).toBe('/api/models/ferry-local/stalled/revision/main');
    const whole = await fetchRaw(`${base}/_ferry/stall-after/${FILE_SIZE}/ferry-local/stalled/resolve/main/b.bin`);
    expect(whole.body.length).toBe(FILE_SIZE);
  });

  it('stalls a resumed download (206) at the same offset of the file', async () => {
    const req = get(`${base}/_ferry/stall-after/100000/ferry-local/resumed/resolve/main/model.safetensors`, {
      headers: { range: 'bytes=60000-' },
    });
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    expect(res.statusCode).toBe(206);
    let received = 0;
    res.on('data', (c: Buffer) => (received += c.length));
    res.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 700));
    expect(received).toBe(40_000);
    req.destroy();
  });

  it('streams: the first bytes reach the client while the upstream still holds the rest', async () => {
    const req = get(`${base}/_ferry/throttle/100000000/gated`);
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    const [first] = (await Promise.race([
      once(res, 'data'),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no bytes before the upstream ended')), 3_000)),
    ])) as [Buffer];
    expect(first.length).toBeGreaterThan(0);
    expect(gateSentAll).toBe(false);
    let total = first.length;
    res.on('data', (c: Buffer) => (total += c.length));
    const ended = once(res, 'end');
    releaseGate();
    await ended;
    expect(total).toBe(2 * 65536);
  });

  it('answers 502 when the upstream is down', async () => {
    const dead = new HubFront({ upstream: 'http://127.0.0.1:1', host: '127.0.0.1', port: 0 });
    const { url } = await dead.start();
    try {
      expect((await fetchRaw(`${url}/api/models/x/y`)).status).toBe(502);
    } finally {
      await dead.stop();
    }
  });
});
