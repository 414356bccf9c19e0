// Where Ferry's worker reaches a model's engine: in-cluster DNS (a worker running in the cluster), the API server's
// service proxy (a worker outside it, with a kubeconfig), or an explicit per-model override (local runs, where the
// engine is a stand-in on 127.0.0.1 because simulated pods have no process behind their addresses).
import { existsSync, readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { FAILURE, failure } from '../../workflows/contract/index.js';
import { authenticatedFetch } from './authenticated-fetch.js';
import type { EndpointResolver, EngineAddress, EnginePod } from '../deps.js';
import { engineServiceName, HTTP_PORT_NAME, serviceName, slotBase, slotEngineServiceName } from '../builders/index.js';

const ENDPOINT_MODES = ['in-cluster', 'service-proxy', 'override'] as const;
type EndpointMode = (typeof ENDPOINT_MODES)[number];

/** What `endpointResolverFromEnv` wires into `ActivityDeps`: the resolver and, where needed, an HTTP client. */
export interface EndpointSetup {
  mode: EndpointMode;
  endpoints: EndpointResolver;
  /** Set for the service proxy: requests must carry the kubeconfig's credentials. */
  http?: typeof fetch;
}

/**
 * The Service the worker reaches the engine through: the model's, or with a front the engine's own; in slot `b`, that
 * revision's engine Service (docs/design/rollout.md, section 2).
 */
const engineService = (model: EngineAddress): string => {
  if (!model.spec.front) return serviceName(model.metadata.name);
  return model.slot === 'b'
    ? slotEngineServiceName(model.metadata.name, model.slot)
    : engineServiceName(model.metadata.name);
};

/**
 * `<namespace>/<name>`, the key of a per-model override; `<namespace>/<name>/<pod>` for one of its pods. In slot `b`,
 * `<name>-b` (as the pods' `app.kubernetes.io/instance`).
 */
const modelKey = (model: EngineAddress, pod?: EnginePod): string =>
  `${model.metadata.namespace}/${slotBase(model.metadata.name, model.slot)}${pod ? `/${pod.name}` : ''}`;

/**
 * The Service's cluster DNS name, `http://<service>.<namespace>.svc:<port>`; given `pod`, that pod's IP and the
 * engine's port (a pod without an IP yet is a retryable `EndpointUnknown`).
 */
export function inClusterEndpoint(model: EngineAddress, pod?: EnginePod): string {
  const { port } = model.spec.engine;
  if (!pod) return `http://${engineService(model)}.${model.metadata.namespace}.svc:${port}`;
  if (!pod.ip) throw failure(FAILURE.EndpointUnknown, `pod ${modelKey(model, pod)} has no IP address yet`);
  return `http://${pod.ip.includes(':') ? `[${pod.ip}]` : pod.ip}:${port}`;
}

/**
 * The Service through the API server's proxy: `<apiserver>/api/v1/namespaces/<ns>/services/<svc>:http/proxy`; given
 * `pod`, that pod's port instead, `…/pods/<pod>:<port>/proxy`. Requests need the kubeconfig's credentials
 * (`authenticatedFetch`) and RBAC on `services/proxy` (get) or `pods/proxy` (get, create: a POST is a create).
 */
export function serviceProxyEndpoint(kc: KubeConfig, model: EngineAddress, pod?: EnginePod): string {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster');
  const ns = encodeURIComponent(model.metadata.namespace);
  const target = pod
    ? `pods/${encodeURIComponent(pod.name)}:${model.spec.engine.port}`
    : `services/${encodeURIComponent(engineService(model))}:${HTTP_PORT_NAME}`;
  return `${server.replace(/\/+$/, '')}/api/v1/namespaces/${ns}/${target}/proxy`;
}

/** Per-model URLs, `<namespace>/<name>` → URL; a function is called on every resolution (the map may change). */
export type EndpointOverrides = Record<string, string> | (() => Record<string, string>);

/**
 * An explicit endpoint override: the URL listed for the model (`<namespace>/<name>`; with a front, the engine's own
 * Service's, `<namespace>/<name>-engine`, when listed) or, given a pod, for that pod (`<namespace>/<name>/<pod>`), else `fallback`'s, else a retryable `EndpointUnknown` failure (a local supervisor may
 * publish the URL a moment later). A pod never falls back to the model's URL: that would reach another replica.
 */
export function overrideEndpoints(overrides: EndpointOverrides, fallback?: EndpointResolver): EndpointResolver {
  return async (model, pod) => {
    const map = typeof overrides === 'function' ? overrides() : overrides;
    const key = modelKey(model, pod);
    // With a front, the engine's own Service is `<namespace>/<name>-engine` (the model's URL is the front's), where
    // the overrides name it; else the model's.
    const engineKey =
      !pod && (model.spec.front || model.slot === 'b')
        ? `${model.metadata.namespace}/${engineService(model)}`
        : undefined;
    const url = (engineKey !== undefined ? map[engineKey] : undefined) ?? map[key];
    if (url !== undefined) return checkedUrl(url, `the endpoint override for ${key}`);
    if (fallback) return fallback(model, pod);
    const known = Object.keys(map).filter((k) => (pod ? k.split('/').length === 3 : k.split('/').length === 2));
    throw failure(
      FAILURE.EndpointUnknown,
      `no endpoint override names ${pod ? 'pod' : 'model'} ${key} (FERRY_ENDPOINT_MODE=override); known: ${known.join(', ') || 'none'}`,
    );
  };
}

function checkedUrl(url: string, what: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw failure(FAILURE.EndpointInvalid, `${what} is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw failure(FAILURE.EndpointInvalid, `${what} must be an http(s) URL, got ${JSON.stringify(url)}`);
  }
  return url.replace(/\/+$/, '');
}

/**
 * The overrides in `FERRY_ENDPOINT_OVERRIDES`: a JSON object, or the paths of JSON files separated by commas, read
 * again on every resolution and merged in order (the local stack's engine stand-in supervisor and node agent each
 * rewrite their own while the worker runs). A missing file is an empty map.
 */
function overridesFromSetting(setting: string): () => Record<string, string> {
  const text = setting.trim();
  if (text.startsWith('{')) {
    const map = parseOverrides(text, 'FERRY_ENDPOINT_OVERRIDES');
    return () => map;
  }
  const files = text
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  return () =>
    Object.assign({}, ...files.map((f) => (existsSync(f) ? parseOverrides(readFileSync(f, 'utf8'), f) : {}))) as Record<
      string,
      string
    >;
}

function parseOverrides(text: string, where: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`${where} is not valid JSON: ${String(err)}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`${where} must be a JSON object of "<namespace>/<name>" (or "<namespace>/<name>/<pod>"): "<url>"`);
  }
  const map: Record<string, string> = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value !== 'string') throw new Error(`${where}: the URL for ${key} must be a string`);
    map[key] = value;
  }
  return map;
}

/**
 * Reads `FERRY_ENDPOINT_MODE` (`in-cluster` | `service-proxy` | `override`; default: `in-cluster` inside a pod,
 * else `service-proxy`) and, for `override`, `FERRY_ENDPOINT_OVERRIDES`. Models without an override fall back to
 * nothing: a local run must not guess.
 */
export function endpointResolverFromEnv(env: NodeJS.ProcessEnv, kc: KubeConfig): EndpointSetup {
  const raw = env.FERRY_ENDPOINT_MODE?.trim();
  const mode: string = raw || (env.KUBERNETES_SERVICE_HOST ? 'in-cluster' : 'service-proxy');
  switch (mode) {
    case 'in-cluster':
      return { mode, endpoints: async (model, pod) => inClusterEndpoint(model, pod) };
    case 'service-proxy':
      return {
        mode,
        endpoints: async (model, pod) => serviceProxyEndpoint(kc, model, pod),
        http: authenticatedFetch(kc),
      };
    case 'override': {
      const setting = env.FERRY_ENDPOINT_OVERRIDES;
      if (!setting?.trim()) {
        throw new Error(
          'FERRY_ENDPOINT_MODE=override needs FERRY_ENDPOINT_OVERRIDES: a JSON object or a JSON file path',
        );
      }
      return { mode, endpoints: overrideEndpoints(overridesFromSetting(setting)) };
    }
    default:
      throw new Error(`FERRY_ENDPOINT_MODE must be one of ${ENDPOINT_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
}
