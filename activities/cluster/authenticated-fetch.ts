// A fetch that carries a kubeconfig's credentials (client certificate, bearer token, exec plugin, CA), for requests
// through the API server's service proxy from a worker outside the cluster. Credentials go to the API server only.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';

/**
 * A `fetch`-compatible function that authenticates requests to the kubeconfig's API server with its credentials;
 * requests to any other origin go through plain `fetch`, without them.
 */
export function authenticatedFetch(kc: KubeConfig): typeof fetch {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster');
  const origin = new URL(server).origin;
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    if (url.origin !== origin) return fetch(request);
    const headers: Record<string, string> = {};
    request.headers.forEach((value, key) => (headers[key] = value));
    const opts: RequestOptions = { method: request.method, headers };
    await kc.applyToHTTPSOptions(opts);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return await new Promise<Response>((resolve, reject) => {
      const req = send(url, { ...opts, signal: request.signal }, (res: IncomingMessage) => {
        const responseHeaders = new Headers();
        for (const [key, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(key, v);
        }
        const status = res.statusCode ?? 502;
        const noBody = request.method === 'HEAD' || status === 204 || status === 304;
        if (noBody) res.resume();
        resolve(
          new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            statusText: res.statusMessage,
            headers: responseHeaders,
          }),
        );
      });
      req.on('error', reject);
      req.end(body);
    });
  };
}
