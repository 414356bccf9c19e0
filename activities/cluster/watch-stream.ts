// One watch request to the API server, read as JSON lines. Not client-node's `Watch`: that one gives up on a request
// whose response headers take longer than 30 s. The API server sends them at once, but a proxy on the way may hold
// them until the first byte of the body (Node's own http server does, unless told to flush), and the first byte of a
// quiet watch is the bookmark the server sends just before it ends the watch, 30 to 60 minutes later. Behind such a
// proxy every renewed watch of a quiet namespace failed after 30 s and was listed again, over and over.
//
// Here the only deadline is the watch's own: the server ends it after `timeoutSeconds`; one still open `graceMs` after
// that is taken for a dead connection (a proxy or a NAT that dropped it without a word) and ended by the client.
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';

/**
 * How a watch ended: the server ended it (`ended`), or the connection did before the server said so (`cut`), or the
 * client did, after the deadline (`stalled`) or when told to stop (`stopped`); `failed` is an error or a status
 * other than 200 (`code`).
 */
export type WatchEnd =
  { how: 'ended' | 'cut' | 'stalled' | 'stopped' } | { how: 'failed'; error: Error; code?: number };

export interface WatchRequest {
  /** The collection's path, `/api/v1/namespaces/<ns>/pods`. */
  path: string;
  /** Query parameters besides `watch` and `timeoutSeconds`. */
  query: Record<string, string | boolean>;
  /** The server ends the watch after this long. */
  timeoutSeconds: number;
  /** The client ends it this long after the server should have. */
  graceMs: number;
  /** Each event as the server sent it: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and its object. */
  onEvent: (type: string, object: Record<string, unknown>) => void;
  /** Ends the watch (`stopped`). */
  signal?: AbortSignal;
}

/** Opens one watch and resolves when it ends, however it ends; never rejects. */
export async function watchOnce(kc: KubeConfig, w: WatchRequest): Promise<WatchEnd> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) return { how: 'failed', error: new Error('the kubeconfig has no current cluster') };
  const url = new URL(server.replace(/\/$/, '') + w.path);
  url.searchParams.set('watch', 'true');
  for (const [key, value] of Object.entries(w.query)) url.searchParams.set(key, String(value));
  url.searchParams.set('timeoutSeconds', String(w.timeoutSeconds));
  const opts: RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
  try {
    await kc.applyToHTTPSOptions(opts);
  } catch (err) {
    return { how: 'failed', error: err instanceof Error ? err : new Error(String(err)) };
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return await new Promise<WatchEnd>((resolve) => {
    const sent: { req?: ClientRequest } = {};
    let settled = false;
    const finish = (end: WatchEnd) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      w.signal?.removeEventListener('abort', stop);
      sent.req?.destroy();
      resolve(end);
    };
    const stop = () => finish({ how: 'stopped' });
    const deadline = setTimeout(() => finish({ how: 'stalled' }), w.timeoutSeconds * 1000 + w.graceMs);
    if (w.signal?.aborted) return stop();
    w.signal?.addEventListener('abort', stop);
    const req = send(url, opts, (res: IncomingMessage) => {
      if (res.statusCode !== 200) return refused(res, finish);
      // A connection that goes quiet for good is found by TCP keep-alive before the deadline, where the OS allows.
      res.socket?.setKeepAlive(true, 30_000);
      const lines = createInterface({ input: res, crlfDelay: Infinity });
      lines.on('line', (line) => {
        if (settled || !line.trim()) return;
        let event: { type?: unknown; object?: unknown };
        try {
          event = JSON.parse(line) as typeof event;
        } catch {
          return finish({
            how: 'failed',
            error: new Error(`the watch sent a line that is not JSON: ${line.slice(0, 80)}`),
          });
        }
        if (typeof event.type === 'string' && typeof event.object === 'object' && event.object !== null) {
          w.onEvent(event.type, event.object as Record<string, unknown>);
        }
      });
      // readline passes on its input's errors: both are a connection that went mid-watch.
      lines.on('error', () => finish({ how: 'cut' }));
      res.on('error', () => finish({ how: 'cut' }));
      res.on('close', () => finish({ how: res.complete ? 'ended' : 'cut' }));
    });
    sent.req = req;
    req.on('error', (error) => finish({ how: 'failed', error }));
    req.end();
  });
}

/** A status other than 200: the server's message (a Status object) and its code. */
function refused(res: IncomingMessage, finish: (end: WatchEnd) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    if (size < 16_384) chunks.push(chunk);
    size += chunk.length;
  });
  const done = () => {
    const text = Buffer.concat(chunks).toString('utf8');
    let message = text.slice(0, 200) || res.statusMessage || 'no message';
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? message;
    } catch {
      // not a Status object: its first bytes
    }
    finish({ how: 'failed', error: new Error(`${res.statusCode}: ${message}`), code: res.statusCode });
  };
  res.on('end', done);
  res.on('error', done);
}
