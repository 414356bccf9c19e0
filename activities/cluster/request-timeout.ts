// client-node's HTTP library, with a time bound on every request: a request the API server (or the network) leaves
// unanswered fails after `timeoutMs` as a retryable ETIMEDOUT instead of holding its activity until the step times
// out. A failure says whether the whole request had left (`sent`): one that never left cannot have taken effect.
import { AsyncLocalStorage } from 'node:async_hooks';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import {
  HttpMethod,
  KubernetesObjectApi,
  ResponseContext,
  wrapHttpLibrary,
  type Configuration,
  type KubeConfig,
  type RequestBody,
  type RequestContext,
} from '@kubernetes/client-node';

/** A network failure of one request, shaped like node-fetch's (a string `code`), plus whether it had been sent. */
class RequestFailure extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly sent: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'RequestFailure';
  }
}

/** The time bound of the requests made inside `run` (an attempt of a retried call), instead of the API's own. */
const attemptTimeoutMs = new AsyncLocalStorage<number>();
export const withRequestTimeout = <T>(timeoutMs: number, run: () => Promise<T>): Promise<T> =>
  attemptTimeoutMs.run(timeoutMs, run);

const HEDGED = new Set([HttpMethod.GET, HttpMethod.DELETE]);

/**
 * A `KubernetesObjectApi` for `kc` whose every request is bounded by `timeoutMs`, or by the bound of the attempt
 * it is made in (`withRequestTimeout`); watches are not made with it. A read or a delete still unanswered after
 * `hedgeReadsAfterMs` is sent once more, and the first answer wins: a request lost on the way (a dropped connection, a
 * stuck server) costs that long instead of the whole bound, while one that is only slow still counts. A delete may be
 * sent twice: Ferry's carry the object's uid as a precondition, and a second one finds the object gone (404, which
 * callers count as done) or already being deleted. Other writes are sent once.
 */
export function boundedObjectApi(kc: KubeConfig, timeoutMs: number, hedgeReadsAfterMs = Infinity): KubernetesObjectApi {
  const httpApi = wrapHttpLibrary({
    send: (request) => {
      const bound = attemptTimeoutMs.getStore() ?? timeoutMs;
      return HEDGED.has(request.getHttpMethod()) && hedgeReadsAfterMs < bound
        ? hedged(request, bound, hedgeReadsAfterMs)
        : send(request, bound);
    },
  });
  class BoundedObjectApi extends KubernetesObjectApi {
    constructor(configuration: Configuration) {
      super({ ...configuration, httpApi });
      this.setDefaultNamespace(kc);
    }
  }
  return kc.makeApiClient(BoundedObjectApi);
}

/**
 * `request` (a read or a delete), sent a second time when the first has no answer after `hedgeAfterMs`; resolves with the first
 * answer (whatever its status) and drops the other request, or fails when both have failed (or the first failed
 * before the second was sent). Both end by the same deadline, `timeoutMs` after the first was sent.
 */
function hedged(request: RequestContext, timeoutMs: number, hedgeAfterMs: number): Promise<ResponseContext> {
  return new Promise((resolve, reject) => {
    const stops: AbortController[] = [];
    let pending = 0;
    let done = false;
    const settle = (finish: () => void) => {
      done = true;
      clearTimeout(second);
      for (const stop of stops) stop.abort();
      finish();
    };
    const start = (ms: number) => {
      const stop = new AbortController();
      stops.push(stop);
      pending++;
      send(request, ms, stop.signal).then(
        (response) => !done && settle(() => resolve(response)),
        (err: Error) => {
          pending--;
          if (!done && (pending === 0 || stops.length === 1)) settle(() => reject(err));
        },
      );
    };
    start(timeoutMs);
    const second = setTimeout(() => !done && start(timeoutMs - hedgeAfterMs), hedgeAfterMs);
  });
}

function send(request: RequestContext, timeoutMs: number, signal?: AbortSignal): Promise<ResponseContext> {
  const url = new URL(request.getUrl());
  const body = bodyOf(request.getBody());
  const headers: Record<string, string> = { ...request.getHeaders() };
  if (body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(body));
  const transport = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    let sent = false;
    let settled = false;
    const fail = (err: Error & { code?: unknown }, code?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const named = code ?? (typeof err.code === 'string' ? err.code : 'ECONNRESET');
      reject(new RequestFailure(`request to ${url.href} failed, reason: ${err.message}`, named, sent, { cause: err }));
      req.destroy();
    };
    const req = transport(
      url,
      { method: request.getHttpMethod(), headers, agent: request.getAgent() },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (err) => fail(err));
        res.on('close', () => {
          if (!res.complete) fail(new Error('the connection closed before the response was complete'), 'ECONNRESET');
        });
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const data = Buffer.concat(chunks);
          resolve(
            new ResponseContext(res.statusCode ?? 500, headersOf(res), {
              text: async () => data.toString('utf8'),
              binary: async () => data,
            }),
          );
        });
      },
    );
    const timer = setTimeout(() => fail(new Error(`request timed out after ${timeoutMs} ms`), 'ETIMEDOUT'), timeoutMs);
    signal?.addEventListener('abort', () => fail(new Error('no longer needed'), 'ECANCELED'), { once: true });
    req.on('finish', () => (sent = true));
    req.on('error', (err) => fail(err));
    req.end(body);
  });
}

function bodyOf(body: RequestBody): string | undefined {
  if (body === undefined || typeof body === 'string') return body;
  if (body instanceof URLSearchParams) return body.toString();
  throw new Error('form bodies are not sent to the Kubernetes API');
}

function headersOf(res: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(res.headers)) {
    if (value !== undefined) headers[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}
