// The real activities for one cluster: Kubernetes from a kubeconfig or in-cluster credentials, engine endpoints as
// FERRY_ENDPOINT_MODE says, progress delivered to each workflow as a `progress` signal, and the watch that wakes a
// model's workflow (`modelChanged`) when one of its objects changes.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, VersionApi } from '@kubernetes/client-node';
import type { Context } from '@temporalio/activity';
import type { Logger } from '@temporalio/worker';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { createActivities, type FerryActivities } from '../activities/index.js';
import { Cluster } from '../activities/cluster/api.js';
import { EventRecorder } from '../activities/cluster/events.js';
import { endpointResolverFromEnv } from '../activities/cluster/endpoints.js';
import { ModelWatcher } from '../activities/cluster/model-watcher.js';
import { WATCHLESS_LOOK_MS, wakeEveryModel } from './wake-every-model.js';
import { Autoscaler } from '../activities/scaling/autoscaler.js';
import type { ProgressSink } from '../activities/cluster/progress.js';
import { reportRetriedAttempt, retryProgress } from '../activities/cluster/retry-progress.js';
import { apiKeyFromSecret } from '../activities/steps/health.js';
import type { SpecSource } from '../activities/deps.js';
import {
  runningOnCluster,
  ferryNamespaceKey,
  modelChangedSignal,
  parseDuration,
  progressSignal,
  scaleSignal,
  specQuery,
  workflowIdFor,
  type ServedModel,
} from '../workflows/contract/index.js';
import type { WorkerConfig } from './config.js';
import { collectGauges, type FerryMetrics } from './metrics.js';
import { grantsInCluster } from './grants-in-cluster.js';

export interface RealActivities {
  activities: FerryActivities;
  /** Posts Kubernetes Events on models' root objects. */
  events: EventRecorder;
  /**
   * Stops the watch, the gauges and the clocks (call once the worker has stopped); resolves once the watch's Leases
   * are given up (at most 3 s).
   */
  stop(): Promise<void>;
  /** Resolves when the Kubernetes API server answers (GET /version), for the readiness probe. */
  ping(): Promise<void>;
  /** Called as each activity attempt starts: a retried one is reported to its workflow. */
  onAttemptStart(ctx: Context): void;
}

/** Builds the activities; logs which Kubernetes API server and endpoint mode they use. */
export function realActivities(
  config: WorkerConfig,
  client: Client,
  logger: Logger,
  metrics?: FerryMetrics,
  /** With Worker Versioning: whether this version is current; the watch wakes models only then (versioning.ts). */
  wakes?: () => Promise<boolean>,
): RealActivities {
  const kc = new KubeConfig();
  // loadFromDefault: KUBECONFIG (which may list several files), ~/.kube/config, then the pod's service account.
  if (config.kubeconfig && !config.kubeconfig.includes(':')) kc.loadFromFile(config.kubeconfig);
  else kc.loadFromDefault();
  const endpoints = endpointResolverFromEnv(config.env, kc);
  if (!config.kubeconfig && !config.env.KUBERNETES_SERVICE_HOST && !existsSync(join(homedir(), '.kube', 'config'))) {
    logger.warn('no kubeconfig and not in a pod: the Kubernetes client falls back to http://localhost:8080', {
      hint: 'set KUBECONFIG or --kubeconfig',
    });
  }
  logger.info('kubernetes', {
    server: kc.getCurrentCluster()?.server,
    context: kc.getCurrentContext(),
    user: kc.getCurrentUser()?.name,
    endpointMode: endpoints.mode,
  });
  const progress = progressSink(client, metrics);
  // A request being retried shows at once as the running step's waiting reason.
  const cluster = new Cluster(kc, { onRetry: retryProgress(progress) });
  const watcher = config.watch ? startWatcher(config, client, kc, cluster, logger, wakes) : undefined;
  // Without the watch, the worker wakes every model itself: the workflow's own safety net is hours apart.
  const stopClock = watcher ? undefined : wakeEveryModel(config.cluster, client, logger, WATCHLESS_LOOK_MS, wakes);
  const autoscaler = watcher ? startAutoscaler(config, client, watcher, endpoints, logger, wakes) : undefined;
  const activities = createActivities(
    {
      cluster,
      endpoints: endpoints.endpoints,
      ...(endpoints.http ? { http: endpoints.http } : {}),
      ...(endpoints.mode === 'service-proxy' ? { proxiedEngines: true } : {}),
      progress,
      specs: specSource(client),
      ...(watcher ? { watcher } : {}),
      ...(config.webUiUrl ? { webUi: { url: config.webUiUrl, namespace: config.temporal.namespace } } : {}),
      ...(config.tenants ? { grants: grantsInCluster(config.tenants, cluster) } : {}),
      ...(config.networkPolicy ? { networkPolicy: config.networkPolicy } : {}),
    },
    // A keyed model's key, read from its Secret when a step needs it (never into history or a log line); a worker
    // whose Role may not get that Secret does without (docs/operations.md, "A model's API key").
    { apiKeys: apiKeyFromSecret({ cluster }) },
  );
  const version = kc.makeApiClient(VersionApi);
  // The gauges cost one visibility list per interval: only when someone scrapes them.
  const stopGauges =
    metrics && config.metricsAddress
      ? collectGauges({ metrics, client, cluster: config.cluster, watcher, logger })
      : undefined;
  const events = new EventRecorder(
    cluster,
    (message, meta) => {
      logger.warn(message, meta);
    },
    hostname(),
  );
  return {
    activities,
    events,
    stop: async () => {
      stopGauges?.();
      stopClock?.();
      autoscaler?.stop();
      // Given up, a Lease is taken by another worker at its next look (5 s), not after 15 s.
      await Promise.race([watcher?.stop(), new Promise((resolve) => setTimeout(resolve, 3_000).unref())]);
    },
    onAttemptStart: (ctx) => reportRetriedAttempt(progress, ctx),
    ping: async () => {
      await version.getCode().catch((err: unknown) => {
        throw new Error(
          `the Kubernetes API server ${kc.getCurrentCluster()?.server ?? ''} does not answer: ${errorText(err)}`,
        );
      });
    },
  };
}

/**
 * The watch over this cluster's models: the namespaces of the running models (from visibility) at start, each new
 * one as a model claims its name. A change wakes the model's workflow with a `modelChanged` signal.
 */
function startWatcher(
  config: WorkerConfig,
  client: Client,
  kc: KubeConfig,
  cluster: Cluster,
  logger: Logger,
  wakes?: () => Promise<boolean>,
): ModelWatcher {
  const renew = config.env.FERRY_WATCH_RENEW?.trim();
  let watchSeconds: number | undefined;
  try {
    watchSeconds = renew ? parseDuration(renew) / 1000 : undefined;
  } catch {
    watchSeconds = NaN;
  }
  if (watchSeconds !== undefined && !(Number.isInteger(watchSeconds) && watchSeconds >= 10)) {
    throw new Error(
      `FERRY_WATCH_RENEW must be a duration of whole seconds, at least 10s; got ${JSON.stringify(renew)}`,
    );
  }
  const watcher = new ModelWatcher(kc, cluster, {
    ...(watchSeconds ? { watchSeconds } : {}),
    // Several workers of the cluster share the waking (FERRY_WATCH_LEASE=on, which the chart sets with more than one
    // replica): each namespace's models by the one holding its Lease. Off, this worker wakes every change.
    ...(config.env.FERRY_WATCH_LEASE?.trim() === 'on'
      ? {
          lease: {
            name: `ferry-watch-${config.cluster}`,
            identity: `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
            ...(wakes ? { eligible: wakes } : {}),
          },
        }
      : {}),
    wake: async ({ namespace, name, objects }) => {
      if (wakes && !(await wakes())) return;
      const workflowId = workflowIdFor({ cluster: config.cluster, namespace, name });
      try {
        await client.workflow.getHandle(workflowId).signal(modelChangedSignal, { objects });
      } catch (err) {
        // A deleted model's objects go after its workflow has ended: nobody to wake.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    },
    log: (level, message, meta) => {
      logger[level](message, meta);
    },
    ...(config.networkPolicy ? { networkPolicies: true } : {}),
  });
  void (async () => {
    const query = runningOnCluster(config.cluster);
    try {
      for await (const execution of client.workflow.list({ query })) {
        const namespace = execution.typedSearchAttributes.get(ferryNamespaceKey);
        if (namespace) watcher.watchNamespace(namespace);
      }
    } catch (err) {
      logger.warn('cannot list running models to watch their namespaces; each is watched from its next look', {
        error: String(err),
      });
    }
  })();
  return watcher;
}

/** The default interval between two readings of every scaling model's load (FERRY_SCALING_INTERVAL). */
const DEFAULT_SCALING_INTERVAL = '5s';

/**
 * The autoscaler over the watch's models (docs/design/scaling.md): each decision is one `ferry.scale` signal.
 * FERRY_SCALING_INTERVAL (a duration, default 5s; `off`: no autoscaler, the counts stay where they are).
 */
function startAutoscaler(
  config: WorkerConfig,
  client: Client,
  watcher: ModelWatcher,
  endpoints: ReturnType<typeof endpointResolverFromEnv>,
  logger: Logger,
  wakes?: () => Promise<boolean>,
): Autoscaler | undefined {
  const setting = (config.env.FERRY_SCALING_INTERVAL ?? DEFAULT_SCALING_INTERVAL).trim();
  if (setting === 'off') return undefined;
  let intervalMs: number;
  try {
    intervalMs = parseDuration(setting);
  } catch {
    throw new Error(`FERRY_SCALING_INTERVAL must be a duration like 5s, or off; got ${JSON.stringify(setting)}`);
  }
  const autoscaler = new Autoscaler({
    watcher,
    endpoints: endpoints.endpoints,
    ...(endpoints.http ? { http: endpoints.http } : {}),
    intervalMs,
    send: async ({ namespace, name }, decision) => {
      // Only the current version's worker decides (Worker Versioning), and of its workers the one holding the
      // namespace's Lease: as only it wakes the models.
      if (!watcher.wakes(namespace) || (wakes && !(await wakes()))) return;
      const workflowId = workflowIdFor({ cluster: config.cluster, namespace, name });
      await client.workflow.getHandle(workflowId).signal(scaleSignal, decision);
    },
    log: (level, message, meta) => {
      logger[level](message, meta);
    },
  });
  autoscaler.start();
  return autoscaler;
}

/** A model's spec from its workflow's `spec` query, asked once per generation (the answer is kept). */
function specSource(client: Client): SpecSource {
  const known = new Map<string, { generation: number; spec: ServedModel }>();
  return async (ref, generation) => {
    const workflowId = workflowIdFor(ref);
    const cached = known.get(workflowId);
    if (cached?.generation === generation) return cached.spec;
    const spec = await client.workflow.getHandle(workflowId).query(specQuery);
    known.set(workflowId, { generation, spec });
    return spec;
  };
}

/**
 * Signals progress to the run that asked for it (a report for an older run fails, and is only logged); a download's
 * report also sets the model's download gauges.
 */
function progressSink(client: Client, metrics: FerryMetrics | undefined): ProgressSink {
  return async ({ workflowId, runId }, progress) => {
    if (progress.step === 'download') metrics?.downloadProgress(workflowId, progress);
    await client.workflow.getHandle(workflowId, runId).signal(progressSignal, progress);
  };
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown; cause?: { code?: unknown } }).cause?.code ?? (err as { code?: unknown }).code;
  return typeof code === 'string' ? `${err.message} (${code})` : err.message;
}
