// A Temporal client from the environment, the same way the worker connects.
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { ConnectError } from './errors.js';
import { readLocalStackEnv } from './local-stack.js';
import {
  connectOptionsOf,
  temporalSettingsFromEnv,
  type Env,
  type TemporalOverrides,
  type TemporalSettings,
} from './temporal-env.js';

export interface ConnectFromEnvOptions {
  /** Defaults to `process.env`. */
  env?: Env;
  /** Flags that win over the environment. */
  overrides?: TemporalOverrides;
  /** Take unset values from the local stack's `.ferry/local.env`. Default true. */
  localStack?: boolean;
  /** Default 10 s. */
  connectTimeoutMs?: number;
}

/** Connects to Temporal as configured by `TEMPORAL_*` variables and `temporal.toml`; close with `client.connection.close()`. */
export async function connectFromEnv(options: ConnectFromEnvOptions = {}): Promise<Client> {
  const env = options.env ?? process.env;
  const local = options.localStack === false ? {} : readLocalStackEnv(env).vars;
  return connectWith(temporalSettingsFromEnv(env, options.overrides, local), options.connectTimeoutMs);
}

/** Connects with settings already read; fails with a `ConnectError` that names the address. */
export async function connectWith(settings: TemporalSettings, connectTimeoutMs = 10_000): Promise<Client> {
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...connectOptionsOf(settings), connectTimeout: connectTimeoutMs });
  } catch (err) {
    throw connectError(settings, err);
  }
  return new Client({ connection, namespace: settings.namespace });
}

/**
 * A client whose calls go out as soon as the connection is up, and `verified`, the check `connectWith` waits for
 * (the channel up and the server answering, within `connectTimeoutMs`), running beside them: it rejects with the
 * same `ConnectError`. For a caller that makes one call and exits (the CLI), which then does not wait a round trip
 * before its call; it should prefer `verified`'s error to its call's, which says less.
 */
export function openWith(
  settings: TemporalSettings,
  connectTimeoutMs = 10_000,
  /** The connection's gRPC interceptors, in place of the SDK's default (its retries). */
  interceptors?: ConnectionOptions['interceptors'],
): { client: Client; verified: Promise<void> } {
  let connection: Connection;
  try {
    connection = Connection.lazy({
      ...connectOptionsOf(settings),
      connectTimeout: connectTimeoutMs,
      ...(interceptors ? { interceptors } : {}),
    });
  } catch (err) {
    throw connectError(settings, err);
  }
  const verified = Promise.race([
    connection.ensureConnected(),
    // gRPC retries a failed connection until its deadline; the channel's first failure ends the wait at once.
    channelFailure(connection),
  ]).catch((err: unknown) => {
    throw connectError(settings, err);
  });
  return { client: new Client({ connection, namespace: settings.namespace }), verified };
}

/** gRPC's connectivity states (grpc-js `connectivityState`). */
const TRANSIENT_FAILURE = 3;
const READY = 2;
const SHUTDOWN = 4;

interface GrpcChannel {
  getConnectivityState(tryToConnect: boolean): number;
  watchConnectivityState(current: number, deadline: Date | number, callback: (err?: Error) => void): void;
}

/**
 * Rejects when the connection's gRPC channel first fails to connect — refused, a name that does not resolve, a TLS
 * handshake refused — which no retry before the deadline would change; never settles otherwise. It watches the channel
 * the SDK already opens (no connection of its own, which a server would log as a broken one); a client whose channel
 * it cannot see waits for the deadline as before.
 */
function channelFailure(connection: Connection): Promise<never> {
  const client = (connection as unknown as { client?: { getChannel?: () => GrpcChannel } }).client;
  const channel = typeof client?.getChannel === 'function' ? client.getChannel() : undefined;
  return new Promise((_resolve, reject) => {
    if (!channel) return;
    const watch = (state: number): void => {
      if (state === TRANSIENT_FAILURE) {
        reject(new Error('the connection failed: refused, a name that does not resolve, or a TLS handshake refused'));
      } else if (state !== READY && state !== SHUTDOWN) {
        channel.watchConnectivityState(state, Infinity, (err) => {
          if (!err) watch(channel.getConnectivityState(false));
        });
      }
    };
    watch(channel.getConnectivityState(true));
  });
}

export function connectError(settings: TemporalSettings, err: unknown): ConnectError {
  const hint = refusedCredentials(err)
    ? CREDENTIALS_HINT
    : notTemporal(err)
      ? "something answers there, but it is not Temporal's frontend (port 7233 by default): check the address"
      : connectHint(settings);
  return new ConnectError(settings.address, hint, { cause: err });
}

/**
 * Whether an HTTP/2 server that is not a gRPC one answered (UNIMPLEMENTED, 12, made from its HTTP status: a 404): not
 * Temporal's frontend. A Temporal server without some API answers UNIMPLEMENTED too, but as gRPC, without the status.
 */
export function notTemporal(err: unknown): boolean {
  for (let c = err; c instanceof Error; c = c.cause) {
    if ((c as { code?: unknown }).code === 12 && /HTTP status code/.test(c.message)) return true;
  }
  return false;
}

const CREDENTIALS_HINT =
  'the server refused the credentials: check TEMPORAL_API_KEY, or the client certificate ' +
  '(TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH)';

/** Whether the server answered UNAUTHENTICATED (16) or PERMISSION_DENIED (7) somewhere in `err`'s causes. */
function refusedCredentials(err: unknown): boolean {
  for (let c = err; c instanceof Error; c = c.cause) {
    const code = (c as { code?: unknown }).code;
    if (code === 16 || code === 7) return true;
  }
  return false;
}

/** What to do when Temporal does not answer: only a local address suggests starting the local stack. */
export function connectHint(settings: Pick<TemporalSettings, 'address' | 'addressSource'>): string {
  const local = /^(localhost|127\.0\.0\.1|\[::1\]|::1)(:\d+)?$/.test(settings.address);
  if (settings.addressSource === 'local stack' || (local && settings.addressSource === 'default')) {
    return 'is the local stack up? run `npm run local:up`';
  }
  const from = {
    flag: 'the --temporal-address flag',
    environment: 'TEMPORAL_ADDRESS',
    'config file': 'the temporal.toml profile',
  };
  return `check ${from[settings.addressSource as keyof typeof from] ?? 'the address'}${local ? ', or run `npm run local:up`' : ''}`;
}
