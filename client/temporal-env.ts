// Where Temporal is and how to reach it, read the way Temporal's own CLI and SDKs read it: TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_GRPC_META_*, and the profiles of
// `temporal.toml` (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE). Shared by the worker and the client.
import { loadClientConfigProfile, toClientOptions, type ClientConfigTLS } from '@temporalio/envconfig';
import type { TLSConfig } from '@temporalio/client';

const DEFAULT_TEMPORAL_ADDRESS = 'localhost:7233';
const DEFAULT_TEMPORAL_NAMESPACE = 'default';

export type Env = Record<string, string | undefined>;

/** Where the address came from: error messages say it, and only a local default suggests `npm run local:up`. */
type AddressSource = 'flag' | 'environment' | 'config file' | 'local stack' | 'default';

export interface TemporalSettings {
  address: string;
  addressSource: AddressSource;
  namespace: string;
  apiKey?: string;
  /** Paths or inline data, as configured; loaded only when connecting. */
  tls?: ClientConfigTLS;
  /** Extra gRPC headers (TEMPORAL_GRPC_META_*). */
  grpcMeta?: Record<string, string>;
  /** The `temporal.toml` profile in use, if one was named. */
  profile?: string;
}

/** Flags that win over the environment. */
export interface TemporalOverrides {
  address?: string;
  namespace?: string;
  profile?: string;
}

/** Options for a `Connection` or a `NativeConnection` (both take this shape). */
export interface TemporalConnectOptions {
  address: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
  metadata?: Record<string, string>;
}

/**
 * Reads the settings with Temporal's precedence (flags, then environment, then the config file profile), then the
 * local stack's `.ferry/local.env` (`localDefaults`) for what is still unset, then `localhost:7233`.
 */
export function temporalSettingsFromEnv(
  env: Env,
  overrides: TemporalOverrides = {},
  localDefaults: Env = {},
): TemporalSettings {
  const vars = definedOnly(env);
  const profileName = overrides.profile ?? vars.TEMPORAL_PROFILE;
  const options = { profile: profileName, overrideEnvVars: vars };
  const fromFile = loadClientConfigProfile({ ...options, disableEnv: true });
  const merged = loadClientConfigProfile(options);

  let address: string;
  let addressSource: AddressSource;
  if (overrides.address) [address, addressSource] = [overrides.address, 'flag'];
  else if (vars.TEMPORAL_ADDRESS) [address, addressSource] = [vars.TEMPORAL_ADDRESS, 'environment'];
  else if (fromFile.address) [address, addressSource] = [fromFile.address, 'config file'];
  else if (localDefaults.TEMPORAL_ADDRESS) [address, addressSource] = [localDefaults.TEMPORAL_ADDRESS, 'local stack'];
  else [address, addressSource] = [DEFAULT_TEMPORAL_ADDRESS, 'default'];

  return {
    address,
    addressSource,
    namespace:
      overrides.namespace ?? merged.namespace ?? localDefaults.TEMPORAL_NAMESPACE ?? DEFAULT_TEMPORAL_NAMESPACE,
    ...(merged.apiKey ? { apiKey: merged.apiKey } : {}),
    ...(merged.tls ? { tls: merged.tls } : {}),
    ...(merged.grpcMeta && Object.keys(merged.grpcMeta).length > 0 ? { grpcMeta: merged.grpcMeta } : {}),
    ...(profileName ? { profile: profileName } : {}),
  };
}

/** Connection options, with certificate files read now; TLS is on when configured or when an API key is set. */
export function connectOptionsOf(settings: TemporalSettings): TemporalConnectOptions {
  const { connectionOptions } = toClientOptions({
    address: settings.address,
    apiKey: settings.apiKey,
    tls: settings.tls,
    grpcMeta: settings.grpcMeta,
  });
  return {
    address: settings.address,
    ...(connectionOptions.tls != null ? { tls: connectionOptions.tls } : {}),
    ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    ...(settings.grpcMeta ? { metadata: settings.grpcMeta } : {}),
  };
}

const REDACTED = '[redacted]';

/** The settings as they may be logged: no API key, no inline key or certificate data, no header values. */
export function redactTemporalSettings(settings: TemporalSettings): Record<string, unknown> {
  const { apiKey, tls, grpcMeta, ...rest } = settings;
  return {
    ...rest,
    ...(apiKey ? { apiKey: REDACTED } : {}),
    ...(tls ? { tls: redactTls(tls) } : {}),
    ...(grpcMeta ? { grpcMeta: Object.fromEntries(Object.keys(grpcMeta).map((key) => [key, REDACTED])) } : {}),
  };
}

function redactTls(tls: ClientConfigTLS): Record<string, unknown> {
  const source = (data: ClientConfigTLS['clientCert']) =>
    data === undefined ? undefined : 'path' in data ? data.path : '[inline]';
  const out: Record<string, unknown> = {
    disabled: tls.disabled,
    serverName: tls.serverName,
    serverCACert: source(tls.serverCACert),
    clientCert: source(tls.clientCert),
    clientKey: tls.clientKey === undefined ? undefined : 'path' in tls.clientKey ? tls.clientKey.path : REDACTED,
  };
  return Object.fromEntries(Object.entries(out).filter(([, value]) => value !== undefined));
}

function definedOnly(env: Env): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}
