// The worker's configuration, from flags and the environment (flags win). Temporal's own variables and profiles
// say where Temporal is; FERRY_* variables say which cluster this worker serves and how it runs.
import { parseArgs } from 'node:util';
import type { LogLevel } from '@temporalio/worker';
import {
  redactTemporalSettings,
  temporalSettingsFromEnv,
  type Env,
  type TemporalSettings,
} from '../client/temporal-env.js';
import { DEFAULT_CLUSTER, DNS1123_LABEL, parseDuration, taskQueueFor } from '../workflows/contract/index.js';
import { parseAddress } from './health.js';
import type { NetworkPolicyPeer } from '../activities/builders/index.js';
import { networkPolicyOf } from './network-policy-setting.js';
import { loadTenants, type Tenants } from './tenants.js';
import { buildIdOf, deploymentNameFor, type Versioning } from './versioning.js';

export interface WorkerConfig {
  temporal: TemporalSettings;
  /** The Kubernetes cluster this worker serves; it polls `taskQueueFor(cluster)`. */
  cluster: string;
  taskQueue: string;
  /** A kubeconfig named by flag or KUBECONFIG; unset means ~/.kube/config, else in-cluster credentials. */
  kubeconfig?: string;
  /** A bundle built ahead of time (`npm run build:workflows`); unset means bundle `workflows/index.ts` at start. */
  workflowBundle?: string;
  /** How long in-flight activities may run on after SIGTERM before they are cancelled (and retried elsewhere). */
  shutdownGraceMs: number;
  logLevel: LogLevel;
  /** Host the `ferry.models.v1` Nexus service (off for a Temporal server without Nexus). */
  nexus: boolean;
  /**
   * The tenants file's grants (docs/security.md): each tenant's Nexus service is hosted on its own task queue, and
   * the cluster's task queue hosts none. Unset: one team, every caller may do everything.
   */
  tenants?: Tenants;
  /** Where `tenants` was read from (for the log). */
  tenantsFile?: string;
  /**
   * Watch the models' objects and wake their workflows when one changes (on); off, the worker wakes every model of
   * its cluster each 30 min instead (worker/wake-every-model.ts), for a worker whose Role lacks list/watch.
   */
  watch: boolean;
  /**
   * How many workflows stay in the worker's memory between their tasks (the SDK's `maxCachedWorkflows`). An idle
   * model needs a task only when woken or at its safety net, and one that was evicted is replayed then (its history
   * is bounded by continue-as-new): the cache is what a worker's memory grows with, per model.
   */
  maxCachedWorkflows: number;
  /**
   * Run as a version of the Worker Deployment `ferry-<cluster>` (on); unset, unversioned, as before Worker Versioning
   * (a Temporal server without Worker Deployments). docs/upgrading.md says what each means for an upgrade.
   */
  versioning?: Versioning;
  /**
   * A one-shot command instead of polling: `replay-check-open` replays the open runs of this cluster's task queue that
   * would replay on this build (all but pinned ones) and exits 0 or 1; `make-current` makes this worker's version the
   * deployment's current one (once the server knows it) and exits.
   */
  command?: 'replay-check-open' | 'make-current';
  /** Where GET /healthz and /readyz answer (`host:port`); unset, no probe endpoints. */
  healthAddress?: string;
  /** Where Prometheus scrapes /metrics, served by the SDK's exporter (`host:port`); unset, no metrics endpoint. */
  metricsAddress?: string;
  /** The Temporal Web UI's base URL: each model's root ConfigMap links its workflow page. */
  webUiUrl?: string;
  /**
   * `--network-policy on`: each model gets a NetworkPolicy that admits only these pods (the worker's) to vLLM's own
   * port, and every engine pod the gate sidecar (docs/design/network-policy.md). Unset: no policies.
   */
  networkPolicy?: NetworkPolicyPeer;
  /** The environment the activities read their own settings from (FERRY_ENDPOINT_MODE, FERRY_ENDPOINT_OVERRIDES). */
  env: Env;
}

/** Below Kubernetes' default terminationGracePeriodSeconds (30 s), so the worker exits before it is killed. */
const DEFAULT_SHUTDOWN_GRACE = '25s';
/** Workflows kept in memory between tasks; measured by bench/steady-state.ts (docs/performance.md). */
const DEFAULT_MAX_CACHED = 100;
const LOG_LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

export const WORKER_USAGE = `Usage: ferry-worker [options]

Hosts ServeModelWorkflow and its activities for one Kubernetes cluster.

Options (each overrides its environment variable):
  --cluster NAME                  FERRY_CLUSTER          cluster served, task queue ferry-NAME (default ${DEFAULT_CLUSTER})
  --temporal-address HOST:PORT    TEMPORAL_ADDRESS       (default localhost:7233)
  --temporal-namespace NAMESPACE  TEMPORAL_NAMESPACE     (default default)
  --profile NAME                  TEMPORAL_PROFILE       a profile of temporal.toml (TEMPORAL_CONFIG_FILE)
  --kubeconfig PATH               KUBECONFIG             (default ~/.kube/config, else in-cluster credentials)
  --workflow-bundle PATH          FERRY_WORKFLOW_BUNDLE  prebuilt bundle (default: bundle workflows/ at start)
  --shutdown-grace DURATION       FERRY_SHUTDOWN_GRACE   (default ${DEFAULT_SHUTDOWN_GRACE})
  --log-level LEVEL               FERRY_LOG_LEVEL        TRACE, DEBUG, INFO, WARN or ERROR (default INFO)
  --nexus on|off                  FERRY_NEXUS            host the ferry.models.v1 Nexus service (default on)
  --tenants FILE                  FERRY_TENANTS_FILE     the tenants and their grants (docs/security.md); each
                                  tenant's Nexus service on its own task queue (default: none, one team)
  --watch on|off                  FERRY_WATCH            watch models' objects, wake their workflows (default on)
  --worker-versioning on|off      FERRY_WORKER_VERSIONING  run as a version of Worker Deployment ferry-CLUSTER,
                                  runs pinned to it (default off: unversioned; docs/upgrading.md)
  --build-id ID                   FERRY_BUILD_ID         this version's build ID (default VERSION-COMMIT of the build)
  --max-cached-workflows N        FERRY_MAX_CACHED_WORKFLOWS  workflows kept in memory between tasks (default ${DEFAULT_MAX_CACHED})
  --health-address HOST:PORT      FERRY_HEALTH_ADDRESS   serve GET /healthz and /readyz there (default: off)
  --metrics-address HOST:PORT     FERRY_METRICS_ADDRESS  serve Prometheus /metrics there (default: off)
  --web-ui-url URL                TEMPORAL_UI_URL        the Temporal Web UI, linked from each model's root ConfigMap
  --network-policy on|off         FERRY_NETWORK_POLICY   a NetworkPolicy per model: only the worker reaches vLLM's
                                  own port, clients the gate's inference routes (default off)
  --worker-namespace NS           FERRY_WORKER_NAMESPACE  the worker's namespace, for --network-policy on
  --worker-pod-labels K=V,...     FERRY_WORKER_POD_LABELS  the worker pods' labels, for --network-policy on
  --replay-check-open             fetch the open runs of ferry-CLUSTER that would replay on this build (all but
                                  pinned ones) and replay them; exit 0 when all do, 1 when any does not
  --make-current                  make this version (--worker-versioning on) the deployment's current one and exit
  --replay-check DIR              replay every history in DIR (*.json, as \`temporal workflow show --output json\`
                                  writes them) on this build's workflows and exit: 0 when all replay, 1 when any
                                  does not, 2 when DIR holds none; connects to nothing
  -h, --help

Also read: TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_GRPC_META_*; FERRY_ENDPOINT_MODE
(in-cluster | service-proxy | override) and FERRY_ENDPOINT_OVERRIDES; FERRY_SCALING_INTERVAL (how often the
autoscaler reads the load of models with spec.scaling, default 5s; off: never); FERRY_WATCH_RENEW (how long
the API server keeps each of the worker's watches open before it is renewed, plus a jitter of up to as long again;
default 30m; shorter for soak tests); FERRY_WATCH_LEASE (on: several workers of the cluster share the watch's
wakes, each namespace's models woken by the worker holding the namespace's Lease; the chart sets it with more than
one replica).
`;

/** A configuration that cannot run; the message lists every problem. */
export class WorkerConfigError extends Error {
  override readonly name = 'WorkerConfigError';
}

/** `--replay-check DIR`: replay the histories in DIR on this build (replay-check.ts), with the bundle given or built. */
export interface ReplayCheckConfig {
  replayCheck: string;
  workflowBundle?: string;
}

/** Parses flags and environment; `'help'` when help was asked for. Throws `WorkerConfigError`. */
export function parseWorkerConfig(argv: string[], env: Env): WorkerConfig | ReplayCheckConfig | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        cluster: { type: 'string' },
        'temporal-address': { type: 'string' },
        'temporal-namespace': { type: 'string' },
        profile: { type: 'string' },
        kubeconfig: { type: 'string' },
        'workflow-bundle': { type: 'string' },
        'shutdown-grace': { type: 'string' },
        'log-level': { type: 'string' },
        nexus: { type: 'string' },
        tenants: { type: 'string' },
        watch: { type: 'string' },
        'worker-versioning': { type: 'string' },
        'build-id': { type: 'string' },
        'max-cached-workflows': { type: 'string' },
        'health-address': { type: 'string' },
        'metrics-address': { type: 'string' },
        'web-ui-url': { type: 'string' },
        'network-policy': { type: 'string' },
        'worker-namespace': { type: 'string' },
        'worker-pod-labels': { type: 'string' },
        'replay-check': { type: 'string' },
        'replay-check-open': { type: 'boolean' },
        'make-current': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new WorkerConfigError((err as Error).message);
  }
  if (values.help) return 'help';
  if (values['replay-check'] !== undefined) {
    const bundle = values['workflow-bundle'] ?? (env.FERRY_WORKFLOW_BUNDLE || undefined);
    if (!values['replay-check']) throw new WorkerConfigError('--replay-check needs a directory of histories');
    return { replayCheck: values['replay-check'], ...(bundle ? { workflowBundle: bundle } : {}) };
  }

  const problems: string[] = [];
  const cluster = values.cluster ?? env.FERRY_CLUSTER ?? DEFAULT_CLUSTER;
  if (cluster.length > 63 || !DNS1123_LABEL.test(cluster)) {
    problems.push(`cluster ${JSON.stringify(cluster)} must be a DNS label (lowercase letters, digits and "-")`);
  }
  const graceText = values['shutdown-grace'] ?? env.FERRY_SHUTDOWN_GRACE ?? DEFAULT_SHUTDOWN_GRACE;
  let shutdownGraceMs = 0;
  try {
    shutdownGraceMs = parseDuration(graceText);
  } catch (err) {
    problems.push(`shutdown grace: ${(err as Error).message}`);
  }
  const level = (values['log-level'] ?? env.FERRY_LOG_LEVEL ?? 'INFO').toUpperCase();
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    problems.push(`log level ${JSON.stringify(level)} must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const nexusText = (values.nexus ?? env.FERRY_NEXUS ?? 'on').toLowerCase();
  if (nexusText !== 'on' && nexusText !== 'off') problems.push(`nexus ${JSON.stringify(nexusText)} must be on or off`);
  const tenantsFile = values.tenants ?? (env.FERRY_TENANTS_FILE || undefined);
  let tenants: Tenants | undefined;
  if (tenantsFile !== undefined) {
    try {
      tenants = loadTenants(tenantsFile);
      if (nexusText === 'off') problems.push('--tenants grants Nexus access: it needs --nexus on');
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  const watchText = (values.watch ?? env.FERRY_WATCH ?? 'on').toLowerCase();
  if (watchText !== 'on' && watchText !== 'off') problems.push(`watch ${JSON.stringify(watchText)} must be on or off`);
  const versioningText = (values['worker-versioning'] ?? env.FERRY_WORKER_VERSIONING ?? 'off').toLowerCase();
  let versioning: Versioning | undefined;
  if (versioningText !== 'on' && versioningText !== 'off') {
    problems.push(`worker versioning ${JSON.stringify(versioningText)} must be on or off`);
  } else if (versioningText === 'on') {
    try {
      versioning = {
        deploymentName: deploymentNameFor(cluster),
        buildId: buildIdOf(values['build-id'] ?? (env.FERRY_BUILD_ID || undefined)),
      };
    } catch (err) {
      problems.push((err as Error).message);
    }
  } else if (values['build-id'] !== undefined) {
    problems.push('--build-id names a version of a Worker Deployment: it needs --worker-versioning on');
  }
  if (values['make-current'] && values['replay-check-open']) {
    problems.push('--make-current and --replay-check-open are two commands: give one');
  } else if (values['make-current'] && !versioning && versioningText === 'off') {
    problems.push('--make-current makes a version of a Worker Deployment current: it needs --worker-versioning on');
  }
  const command = values['make-current']
    ? ('make-current' as const)
    : values['replay-check-open']
      ? ('replay-check-open' as const)
      : undefined;
  const cachedText = values['max-cached-workflows'] ?? env.FERRY_MAX_CACHED_WORKFLOWS ?? String(DEFAULT_MAX_CACHED);
  const maxCachedWorkflows = Number(cachedText);
  if (!/^\d+$/.test(cachedText.trim()) || maxCachedWorkflows < 0) {
    problems.push(`max cached workflows ${JSON.stringify(cachedText)} must be a whole number (0 turns the cache off)`);
  }
  const addressOf = (what: string, text: string | undefined): string | undefined => {
    if (!text) return undefined;
    try {
      const { host, port } = parseAddress(text);
      return `${host}:${port}`;
    } catch (err) {
      problems.push(`${what} address: ${(err as Error).message}`);
      return undefined;
    }
  };
  const healthAddress = addressOf('health', values['health-address'] ?? env.FERRY_HEALTH_ADDRESS);
  const metricsAddress = addressOf('metrics', values['metrics-address'] ?? env.FERRY_METRICS_ADDRESS);
  const webUiUrl = values['web-ui-url'] ?? (env.TEMPORAL_UI_URL || undefined);
  if (webUiUrl !== undefined && !/^https?:\/\/[^\s/]+/.test(webUiUrl)) {
    problems.push(`web UI URL ${JSON.stringify(webUiUrl)} must be an http:// or https:// URL`);
  }
  const networkPolicy = networkPolicyOf(values, env, problems);
  let temporal: TemporalSettings | undefined;
  try {
    temporal = temporalSettingsFromEnv(env, {
      address: values['temporal-address'],
      namespace: values['temporal-namespace'],
      profile: values.profile,
    });
  } catch (err) {
    problems.push(`Temporal client configuration: ${(err as Error).message}`);
  }
  if (problems.length > 0 || !temporal) throw new WorkerConfigError(problems.join('; '));

  const kubeconfig = values.kubeconfig ?? (env.KUBECONFIG || undefined);
  const workflowBundle = values['workflow-bundle'] ?? (env.FERRY_WORKFLOW_BUNDLE || undefined);
  return {
    temporal,
    cluster,
    taskQueue: taskQueueFor(cluster),
    ...(kubeconfig ? { kubeconfig } : {}),
    ...(workflowBundle ? { workflowBundle } : {}),
    shutdownGraceMs,
    logLevel: level as LogLevel,
    nexus: nexusText !== 'off',
    ...(tenants ? { tenants, tenantsFile } : {}),
    watch: watchText !== 'off',
    ...(versioning ? { versioning } : {}),
    ...(command ? { command } : {}),
    maxCachedWorkflows,
    ...(healthAddress ? { healthAddress } : {}),
    ...(metricsAddress ? { metricsAddress } : {}),
    ...(webUiUrl ? { webUiUrl } : {}),
    ...(networkPolicy ? { networkPolicy } : {}),
    env,
  };
}

/** The configuration as it may be logged: secrets redacted, the environment reduced to Ferry's own settings. */
export function redactWorkerConfig(config: WorkerConfig): Record<string, unknown> {
  const { temporal, env, tenants, ...rest } = config;
  return {
    ...rest,
    ...(tenants ? { tenants: tenants.map((t) => `${t.name} (task queue ${t.nexusTaskQueue})`) } : {}),
    temporal: redactTemporalSettings(temporal),
    ...(env.FERRY_ENDPOINT_MODE ? { endpointMode: env.FERRY_ENDPOINT_MODE } : {}),
    ...(env.FERRY_ENDPOINT_OVERRIDES ? { endpointOverrides: describeOverrides(env.FERRY_ENDPOINT_OVERRIDES) } : {}),
  };
}

// FERRY_ENDPOINT_OVERRIDES is inline JSON or file paths (separated by commas); only paths are worth logging.
function describeOverrides(value: string): string {
  return value.trim().startsWith('{') ? '[inline JSON]' : value;
}
