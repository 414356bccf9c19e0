// The kubelet's HTTPS endpoint, as far as the API server uses it here: container logs (`kubectl logs`, and Ferry's log
// tails through pods/log). The API server connects with its kubelet client certificate (signed by the cluster's CA);
// nothing else is let in. The agent's nodes name this address and port in their status.
import { createServer, type Server } from 'node:https';
import { openSync, readFileSync, readSync, closeSync, statSync } from 'node:fs';

/** Finds a container's log file: the current run's, or with `previous` the run before. */
type LogLookup = (namespace: string, pod: string, container: string, previous: boolean) => string | undefined | null;

export interface KubeletServerOptions {
  host: string;
  port: number;
  cert: string;
  key: string;
  ca: string;
  logs: LogLookup;
}

/** The last `tailLines` lines of `text` (all when unset), cut to the last `limitBytes` bytes. */
export function tail(text: Buffer, tailLines?: number, limitBytes?: number): Buffer {
  let out = text;
  if (tailLines !== undefined && tailLines >= 0) {
    let end = out.length;
    if (end > 0 && out[end - 1] === 0x0a) end--;
    let count = 0;
    let start = 0;
    for (let i = end - 1; i >= 0; i--) {
      if (out[i] === 0x0a && ++count === tailLines) {
        start = i + 1;
        break;
      }
    }
    out = tailLines === 0 ? Buffer.alloc(0) : out.subarray(start);
  }
  if (limitBytes !== undefined && limitBytes >= 0 && out.length > limitBytes) out = out.subarray(0, limitBytes);
  return out;
}

/** At most the last `max` bytes of a file. */
function readEnd(file: string, max: number): Buffer {
  const size = statSync(file).size;
  const length = Math.min(size, max);
  const buffer = Buffer.alloc(length);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buffer, 0, length, size - length);
  } finally {
    closeSync(fd);
  }
  return buffer;
}

export function startKubeletServer(options: KubeletServerOptions): Promise<Server> {
  const server = createServer(
    {
      cert: readFileSync(options.cert),
      key: readFileSync(options.key),
      ca: readFileSync(options.ca),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      const url = new URL(req.url ?? '/', 'https://kubelet');
      if (url.pathname === '/healthz') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      }
      const match = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
      if (!match || req.method !== 'GET') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found\n');
        return;
      }
      const [namespace, pod, container] = match.slice(1).map(decodeURIComponent) as [string, string, string];
      const previous = url.searchParams.get('previous') === 'true';
      const file = options.logs(namespace, pod, container, previous);
      if (file === null) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end(`pod ${namespace}/${pod} is not on this node\n`);
        return;
      }
      if (!file) {
        const what = previous ? 'previous terminated container' : 'container';
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`${what} "${container}" in pod "${pod}" not found\n`);
        return;
      }
      const number = (name: string) => {
        const v = url.searchParams.get(name);
        return v === null || v === '' ? undefined : Number(v);
      };
      // Logs here are small (a local stack's runs): the last 8 MiB is more than any tail Ferry or a person asks for.
      const text = tail(readEnd(file, 8 * 1024 * 1024), number('tailLines'), number('limitBytes'));
      res.writeHead(200, { 'content-type': 'text/plain' }).end(text);
    },
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve(server));
  });
}
