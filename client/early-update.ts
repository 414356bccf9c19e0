// The CLI's first request, sent before the Temporal SDK has loaded. `ferry update` and `ferry delete` are each one
// Workflow Update, and loading the SDK (its protobuf definitions above all) takes a `ferry` process longer than the
// workflow takes to act on the update. So the CLI sends that one request itself, over Node's own HTTP/2, with the
// same settings, headers and payload encoding the SDK would use, and loads the SDK while the server works. The SDK
// then takes over under the same update ID: Temporal answers a second request for an update ID it knows with that
// update, so whatever happened to this request (not accepted yet, rejected, lost), the SDK's path decides as before.
//
// Nothing here loads the SDK (its types only) or reaches into its internal modules: the request is Temporal's public
// gRPC API (`UpdateWorkflowExecution`), encoded here, and test/unit/early-update.test.ts checks it, the reading of the
// answer and of the address against the SDK's own, so an SDK release that differs fails there, not in people's hands.
// The CLI's prelude (client/cli/prepare.ts) loads this before the SDK.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  connect,
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type SecureClientSessionOptions,
} from 'node:http2';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import type { TLSConfig } from '@temporalio/client';
import { connectOptionsOf, type Env, type TemporalSettings } from './temporal-env.js';

/** The Temporal identity a client of the SDK has by default: the CLI's early update says the same. */
export const SDK_IDENTITY = `${process.pid}@${hostname()}`;

/** An update on its way: the SDK's path waits for `answer`, then goes on under `updateId`. */
export interface EarlyUpdate {
  workflowId: string;
  updateName: string;
  updateId: string;
  /** When it was sent (`Date.now()`): the SDK's path waits for acceptance until ACCEPT_TIMEOUT_MS after it. */
  sentAt: number;
  /**
   * The workflow's acceptance, with no outcome yet or a successful one; `undefined` for every other answer (an error,
   * a rejection, a stage short of accepted, no connection), and when `close()` came first. Never rejects.
   */
  answer: Promise<Accepted | undefined>;
  /** Ends the request and its connection (the update itself goes on once sent). */
  close(): void;
}

/** An update the workflow accepted. */
export interface Accepted {
  runId: string;
  /**
   * Its result, when the answer came with it: an update whose handler returns at once (`updateModel`) completes in
   * the workflow task that accepts it. Only a result sent as the SDK's default converter sends it (`json/plain`, or
   * `binary/null` for none): another encoding is left to the SDK.
   */
  completed?: { result: unknown };
}

export interface EarlyUpdateRequest {
  workflowId: string;
  updateName: string;
  /** The update's one argument, sent as the SDK's default converter sends it (`json/plain`). */
  arg: unknown;
}

/** How long the workflow may take to accept an update: it needs a worker to run the validator. */
export const ACCEPT_TIMEOUT_MS = 30_000;

const DEFAULT_PORT = 7233;
const METHOD = '/temporal.api.workflowservice.v1.WorkflowService/UpdateWorkflowExecution';
/** `UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED`. */
export const STAGE_ACCEPTED = 2;
/** `UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED`. */
const STAGE_COMPLETED = 3;
/** The proxy variables gRPC honours: with one set, the request would not go the way the SDK's goes. */
const PROXY_VARIABLES = ['grpc_proxy', 'https_proxy', 'http_proxy'];

/**
 * Sends `request` as a Workflow Update, waiting for the stage the SDK waits for (accepted). `undefined` when the
 * settings ask for what only the SDK does (an HTTP proxy) or cannot be read: the SDK's path then sends it alone.
 */
export function sendEarlyUpdate(
  settings: TemporalSettings,
  request: EarlyUpdateRequest,
  env: Env,
): EarlyUpdate | undefined {
  if (PROXY_VARIABLES.some((name) => env[name] || env[name.toUpperCase()])) return undefined;
  let target: { authority: string; url: string; tls?: SecureClientSessionOptions; headers: OutgoingHttpHeaders };
  try {
    target = targetOf(settings);
  } catch {
    return undefined;
  }
  const updateId = randomUUID();
  const body = encodeUpdateRequest({
    namespace: settings.namespace,
    workflowId: request.workflowId,
    updateId,
    identity: SDK_IDENTITY,
    updateName: request.updateName,
    json: JSON.stringify(request.arg),
  });
  const sentAt = Date.now();
  let session: ClientHttp2Session | undefined;
  let settle: (accepted: Accepted | undefined) => void = () => undefined;
  const answer = new Promise<Accepted | undefined>((resolve) => {
    settle = (accepted) => {
      resolve(accepted);
      session?.close();
    };
  });
  try {
    session = connect(target.url, target.tls ?? {});
    session.on('error', () => settle(undefined));
    const stream = session.request({
      ':method': 'POST',
      ':path': METHOD,
      ':authority': target.authority,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': `${ACCEPT_TIMEOUT_MS}m`, // the SDK's path waits as long (send-update.ts)
      ...target.headers,
      'temporal-namespace': settings.namespace,
    });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    stream.on('response', (headers) => {
      if (headers[':status'] !== 200) settle(undefined);
      status = headers['grpc-status'] as string | undefined; // a trailers-only answer: an error
    });
    stream.on('trailers', (trailers: IncomingHttpHeaders) => {
      status = trailers['grpc-status'] as string | undefined;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', () => settle(undefined));
    stream.on('close', () => {
      if (status !== '0') return settle(undefined);
      const message = grpcMessage(Buffer.concat(chunks));
      const answered = message && readUpdateResponse(message);
      settle(answered ? acceptedOf(answered) : undefined);
    });
    stream.end(frame(body));
  } catch {
    settle(undefined);
  }
  return {
    workflowId: request.workflowId,
    updateName: request.updateName,
    updateId,
    sentAt,
    answer,
    close: () => {
      settle(undefined);
      session?.destroy(); // a request still waiting is cancelled; an update the server has admitted goes on
    },
  };
}

/**
 * Where the SDK's connection would go, and how: the address with Temporal's default port, TLS as the SDK turns it
 * on (a TLS setting, or an API key), the server name it checks and sends as the authority, and the headers it sends
 * with every call (the API key as a bearer token, `TEMPORAL_GRPC_META_*`, the client's name and version).
 */
function targetOf(settings: TemporalSettings): {
  authority: string;
  url: string;
  tls?: SecureClientSessionOptions;
  headers: OutgoingHttpHeaders;
} {
  const options = connectOptionsOf(settings);
  const split = hostPortOf(options.address);
  if (!split) throw new TypeError(`not a host:port: ${options.address}`);
  const host = split.hostname.includes(':') ? `[${split.hostname}]` : split.hostname;
  const address = `${host}:${split.port ?? DEFAULT_PORT}`;
  const tls = tlsOf(options.tls, options.apiKey);
  const headers: OutgoingHttpHeaders = {};
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  for (const [key, value] of Object.entries(options.metadata ?? {})) headers[key.toLowerCase()] = value;
  headers['client-name'] ??= 'temporal-typescript';
  headers['client-version'] ??= sdkVersion();
  if (!tls) return { authority: address, url: `http://${address}`, headers };
  const bytes = (data: Buffer | Uint8Array | undefined) => (data ? Buffer.from(data) : undefined);
  const ca = bytes(tls.serverRootCACertificate);
  const cert = bytes(tls.clientCertPair?.crt);
  const key = bytes(tls.clientCertPair?.key);
  const serverName = tls.serverNameOverride;
  return {
    authority: serverName ?? address,
    url: `https://${address}`,
    tls: {
      ALPNProtocols: ['h2'],
      ...(ca ? { ca } : {}),
      ...(cert && key ? { cert, key } : {}),
      ...(serverName ? { servername: serverName } : {}),
    },
    headers,
  };
}

/**
 * `host`, `host:port`, `[ipv6]` or `[ipv6]:port`, as the SDK's connection reads an address (no scheme, no path); the
 * SDK's own parser is internal to it, so this is Ferry's, checked against the SDK's in test/unit/early-update.test.ts.
 */
export function hostPortOf(address: string): { hostname: string; port?: number } | undefined {
  const match = /^(?:\[(?<ipv6>[0-9a-fA-F.:]+)\]|(?<host>[^:/[\]]+))(?::(?<port>\d+))?$/.exec(address);
  if (!match?.groups) return undefined;
  const { ipv6, host, port } = match.groups;
  return { hostname: (ipv6 ?? host)!, ...(port !== undefined ? { port: Number(port) } : {}) };
}

/** TLS as the SDK's connection turns it on: a TLS setting, or an API key (TLS with the system's CAs). */
function tlsOf(tls: TLSConfig | boolean | null | undefined, apiKey: unknown): TLSConfig | undefined {
  const on = tls ?? (apiKey !== undefined ? true : undefined);
  if (typeof on === 'object') return on ?? undefined;
  return on ? {} : undefined;
}

/** The answer as `EarlyUpdate.answer` tells it: accepted (with a result, if complete), or `undefined`. */
function acceptedOf(answer: UpdateAnswer): Accepted | undefined {
  if (answer.stage < STAGE_ACCEPTED || answer.failed || !answer.runId) return undefined;
  return {
    runId: answer.runId,
    ...(answer.stage >= STAGE_COMPLETED && answer.result ? { completed: { result: answer.result.value } } : {}),
  };
}

/** The installed SDK client's version, which it sends as `client-version`. */
function sdkVersion(): string {
  const file = createRequire(import.meta.url).resolve('@temporalio/client/package.json');
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

/** A gRPC message frame: not compressed, its length, the message. */
function frame(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** The one message of a unary gRPC answer (uncompressed, as the server sends it to a client that asked for none). */
function grpcMessage(data: Buffer): Buffer | undefined {
  if (data.length < 5 || data[0] !== 0) return undefined;
  const length = data.readUInt32BE(1);
  return data.length >= 5 + length ? data.subarray(5, 5 + length) : undefined;
}

// Protocol Buffers, only the fields of the request and answer below (temporal/api/workflowservice/v1).

class Writer {
  private readonly parts: number[] = [];
  varint(value: number): this {
    let v = value >>> 0;
    while (v > 0x7f) {
      this.parts.push((v & 0x7f) | 0x80);
      v >>>= 7;
    }
    this.parts.push(v);
    return this;
  }
  bytes(field: number, data: Uint8Array): this {
    this.varint((field << 3) | 2).varint(data.length);
    for (const b of data) this.parts.push(b);
    return this;
  }
  string(field: number, text: string): this {
    return this.bytes(field, Buffer.from(text, 'utf8'));
  }
  message(field: number, write: (w: Writer) => void): this {
    const inner = new Writer();
    write(inner);
    return this.bytes(field, inner.finish());
  }
  enum(field: number, value: number): this {
    return this.varint(field << 3).varint(value);
  }
  finish(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

/** `UpdateWorkflowExecutionRequest`, waiting for the accepted stage, with one `json/plain` argument. */
export function encodeUpdateRequest(r: {
  namespace: string;
  workflowId: string;
  updateId: string;
  identity: string;
  updateName: string;
  json: string;
}): Uint8Array {
  return new Writer()
    .string(1, r.namespace)
    .message(2, (execution) => execution.string(1, r.workflowId))
    .message(4, (wait) => wait.enum(1, STAGE_ACCEPTED))
    .message(5, (request) =>
      request
        .message(1, (meta) => meta.string(1, r.updateId).string(2, r.identity))
        .message(2, (input) =>
          input
            .message(1, () => undefined) // an empty header, as the SDK sends it
            .string(2, r.updateName)
            .message(3, (args) =>
              args.message(1, (payload) =>
                payload.message(1, (entry) => entry.string(1, 'encoding').string(2, 'json/plain')).string(2, r.json),
              ),
            ),
        ),
    )
    .finish();
}

/** What the CLI needs of an `UpdateWorkflowExecutionResponse`. */
export interface UpdateAnswer {
  runId?: string;
  stage: number;
  /** The outcome is a failure (a rejection, or an update that failed). */
  failed: boolean;
  /** The outcome is a success whose one payload this module can read (`json/plain`, `binary/null`): its value. */
  result?: { value: unknown };
}

/**
 * Reads `UpdateWorkflowExecutionResponse`'s update ref's run ID, its stage, and its outcome: a failure, or a success
 * with its value.
 */
export function readUpdateResponse(bytes: Uint8Array): UpdateAnswer | undefined {
  try {
    const answer: UpdateAnswer = { stage: 0, failed: false };
    for (const [field, value] of fields(bytes)) {
      if (field === 1 && value instanceof Uint8Array) {
        for (const [f, execution] of fields(value)) {
          if (f !== 1 || !(execution instanceof Uint8Array)) continue;
          for (const [g, id] of fields(execution)) {
            if (g === 2 && id instanceof Uint8Array) answer.runId = Buffer.from(id).toString('utf8');
          }
        }
      } else if (field === 2 && value instanceof Uint8Array) {
        for (const [f, outcome] of fields(value)) {
          if (f === 2) answer.failed = true;
          else if (f === 1 && outcome instanceof Uint8Array) {
            const result = readPayloads(outcome);
            if (result) answer.result = result;
          }
        }
      } else if (field === 3 && typeof value === 'number') {
        answer.stage = value;
      }
    }
    return answer;
  } catch {
    return undefined;
  }
}

/** The value of `Payloads` holding one payload this module can decode; `undefined` for anything else. */
function readPayloads(bytes: Uint8Array): { value: unknown } | undefined {
  const payloads = [...fields(bytes)].filter(([f]) => f === 1);
  if (payloads.length !== 1 || !(payloads[0]![1] instanceof Uint8Array)) return undefined;
  let encoding: string | undefined;
  let data: Uint8Array = new Uint8Array();
  for (const [f, value] of fields(payloads[0]![1])) {
    if (!(value instanceof Uint8Array)) continue;
    if (f === 2) data = value;
    else if (f === 1) {
      // A map entry: key (1), value (2). Only the encoding matters here; other metadata (a codec's) means the
      // payload is not plain data.
      let key: string | undefined;
      let entry: Uint8Array | undefined;
      for (const [g, part] of fields(value)) {
        if (g === 1 && part instanceof Uint8Array) key = Buffer.from(part).toString('utf8');
        if (g === 2 && part instanceof Uint8Array) entry = part;
      }
      if (key !== 'encoding') return undefined;
      encoding = entry ? Buffer.from(entry).toString('utf8') : undefined;
    } else return undefined; // a payload stored elsewhere (external_payloads): the SDK's to fetch
  }
  if (encoding === 'binary/null') return { value: undefined };
  if (encoding === 'json/plain') return { value: JSON.parse(Buffer.from(data).toString('utf8')) as unknown };
  return undefined;
}

/** The fields of a message: varints as numbers (up to 2^53), length-delimited ones as bytes; others skipped. */
function* fields(bytes: Uint8Array): Generator<[number, number | Uint8Array]> {
  let pos = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      if (pos >= bytes.length || shift > 63) throw new RangeError('truncated varint');
      const b = bytes[pos++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
  };
  while (pos < bytes.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) yield [field, varint()];
    else if (wire === 2) {
      const length = varint();
      if (pos + length > bytes.length) throw new RangeError('truncated field');
      yield [field, bytes.subarray(pos, pos + length)];
      pos += length;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new RangeError(`wire type ${wire}`);
    if (pos > bytes.length) throw new RangeError('truncated field');
  }
}
