// An HTTP/2 relay in front of the local Temporal that writes down every gRPC call (the method and the headers, in the
// order the calls arrived) and passes it on: a test can then say which requests a `ferry` process sent, and in what
// order, without reading the server's logs. Over TLS when given a key and certificate; with `admit`, a call it
// refuses is answered UNAUTHENTICATED, as Temporal Cloud answers a wrong API key.
import {
  connect,
  constants as h2,
  createSecureServer,
  createServer,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { readLocalEnv } from './local-env.js';

export interface RelayedCall {
  /** The method's name: `UpdateWorkflowExecution`. */
  method: string;
  headers: IncomingHttpHeaders;
  /** Passed on (else answered UNAUTHENTICATED). */
  admitted: boolean;
  /** Which of the relay's client connections it came on: 1 for the first, and so on. */
  connection: number;
}

export interface RelayOptions {
  /** Temporal's address. Default: the local stack's. */
  upstream?: string;
  /** Serve TLS with this key and certificate. */
  tls?: { key: Buffer; cert: Buffer };
  /** Whether to pass a call on. Default: every call. */
  admit?: (headers: IncomingHttpHeaders) => boolean;
}

export interface GrpcRelay {
  /** `127.0.0.1:<port>`, for TEMPORAL_ADDRESS. */
  address: string;
  calls: RelayedCall[];
  close(): Promise<void>;
}

export async function startGrpcRelay(options: RelayOptions = {}): Promise<GrpcRelay> {
  const upstream = connect(`http://${options.upstream ?? readLocalEnv().TEMPORAL_ADDRESS}`);
  upstream.on('error', () => undefined);
  const calls: RelayedCall[] = [];
  const server = options.tls ? createSecureServer(options.tls) : createServer();
  const sessions = new Map<object, number>();
  let connections = 0;
  server.on('session', (session) => {
    sessions.set(session, ++connections);
    session.once('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const connection = sessions.get(stream.session!) ?? 0;
    stream.on('error', () => undefined);
    const admitted = options.admit?.(headers) ?? true;
    calls.push({ method: String(headers[':path']).split('/').pop()!, headers: { ...headers }, admitted, connection });
    if (!admitted) {
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc',
          'grpc-status': '16',
          'grpc-message': 'Request unauthorized.',
        },
        { endStream: true },
      );
      return;
    }
    const forwarded: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) {
      if (!name.startsWith(':') || name === ':method' || name === ':path') forwarded[name] = value;
    }
    const call = upstream.request(forwarded);
    call.on('error', () => stream.close(h2.NGHTTP2_INTERNAL_ERROR));
    stream.on('close', () => call.close(h2.NGHTTP2_CANCEL));
    stream.pipe(call);
    let trailers: OutgoingHttpHeaders = {};
    call.on('trailers', (t) => (trailers = t));
    call.on('response', (responseHeaders, flags) => {
      if (flags & h2.NGHTTP2_FLAG_END_STREAM) {
        stream.respond(responseHeaders, { endStream: true }); // a trailers-only response: a gRPC error
        return;
      }
      stream.respond(responseHeaders, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      call.pipe(stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sessions.keys()) (s as { destroy(): void }).destroy();
      upstream.close();
      await closed;
    },
  };
}
