// A Ferry worker: ServeModelWorkflow and its activities on the task queue of one cluster.
import { Client } from '@temporalio/client';
import {
  NativeConnection,
  Runtime,
  Worker,
  type ActivityInterceptorsFactory,
  type Logger,
  type LogLevel,
  type LogMetadata,
  type WorkflowBundleOption,
} from '@temporalio/worker';
import { createServingActivities } from '../client/serving-activities.js';
import { connectOptionsOf } from '../client/temporal-env.js';
import type { FerryActivities } from '../workflows/contract/index.js';
import type { RealActivities } from './activities.js';
import type { WorkerConfig } from './config.js';
import type { Context as ActivityContext } from '@temporalio/activity';
import { keepAlive } from '../activities/cluster/progress.js';
import type { ReadinessCheck } from './health.js';
import { ActivityFailureCounter, FerryMetrics } from './metrics.js';
import { modelEventsSinks } from './model-events.js';
import { ferryModelsHandler, tenantModelsHandler, type TenantHandlerOptions } from './nexus-handler.js';
import { keepVersion, type KeeperOptions } from './versioning.js';
import { bundleFerryWorkflows } from './workflow-bundle.js';

/** After the grace period, activities are cancelled; this much more lets them confirm before the worker gives up. */
const FORCE_AFTER_GRACE_MS = 10_000;

export interface WorkerOverrides {
  /** Activities to host instead of the real ones (tests host stubs; nothing touches Kubernetes then). */
  activities?: FerryActivities;
  /** A bundle already built (tests build it once per file); wins over `config.workflowBundle`. */
  workflowBundle?: WorkflowBundleOption;
  /** A connection to reuse; it is not closed by `close()`. */
  connection?: NativeConnection;
  /** Where the worker's own lines go (the SDK's go to the Runtime's logger). */
  logger?: Logger;
  /** How often the version keeper looks (tests look more often than the 30 s default). */
  versionKeeper?: KeeperOptions;
}

export interface FerryWorker {
  worker: Worker;
  /** A client on the worker's connection (progress signals use it). */
  client: Client;
  connection: NativeConnection;
  /** Runs the worker and every tenant's Nexus worker until all have stopped (`shutdown`, or one failing). */
  run(): Promise<void>;
  /** Stops polling everywhere; `run()` resolves once in-flight work is done. */
  shutdown(): void;
  /** What /readyz checks: the worker polls, Temporal answers, and (with the real activities) the API server. */
  readiness: Record<string, ReadinessCheck>;
  /** Closes the connection if the worker opened it; call after `worker.run()` has resolved. */
  close(): Promise<void>;
}

const PROBE_DEADLINE_MS = 2_000;
/** See stickyQueueScheduleToStartTimeout below; bench/chaos.ts measures recovery with it. */
const STICKY_TIMEOUT = '3s';

/** Connects to Temporal and creates the worker; `worker.run()` starts polling, `worker.shutdown()` drains it. */
export async function createWorker(config: WorkerConfig, overrides: WorkerOverrides = {}): Promise<FerryWorker> {
  const ownConnection = !overrides.connection;
  let stopReal: (() => Promise<void>) | undefined;
  let stopKeeper: (() => void) | undefined;
  const connection = overrides.connection ?? (await NativeConnection.connect(connectOptionsOf(config.temporal)));
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    const logger = overrides.logger ?? Runtime.instance().logger;
    const metrics = new FerryMetrics(Runtime.instance().metricMeter);
    const keeper = config.versioning
      ? keepVersion(client, config.temporal.namespace, config.versioning, logger, overrides.versionKeeper)
      : undefined;
    stopKeeper = keeper ? () => keeper.stop() : undefined;
    const real = overrides.activities
      ? undefined
      : await loadRealActivities(config, client, logger, metrics, keeper && (() => keeper.isCurrent()));
    stopReal = real ? () => real.stop() : undefined;
    const ferry = overrides.activities ?? real!.activities;
    // The Nexus service's command workflows act on models through their workflows, with this worker's client.
    const activities = { ...createServingActivities(client), ...ferry };
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.taskQueue,
      activities,
      // With a tenants file, each tenant's service is on its own queue (below) and this queue hosts none.
      ...(config.nexus && !config.tenants ? { nexusServices: [ferryModelsHandler] } : {}),
      ...(await workflowSource(config, overrides, logger)),
      // Status changes become log lines, metrics and Kubernetes Events; failed activity attempts are counted by type.
      sinks: modelEventsSinks({ logger, metrics, ...(real ? { events: real.events } : {}) }),
      interceptors: { activity: activityInterceptors(metrics, real ? (ctx) => real.onAttemptStart(ctx) : undefined) },
      maxCachedWorkflows: config.maxCachedWorkflows,
      // A version of the cluster's Worker Deployment; runs are pinned to the version that started them (versioning.ts).
      ...(config.versioning
        ? {
            workerDeploymentOptions: {
              version: config.versioning,
              useWorkerVersioning: true,
              defaultVersioningBehavior: 'PINNED' as const,
            },
          }
        : {}),
      // A workflow task waits this long on the queue of the worker that last ran the workflow before any worker may
      // take it: after a worker is lost (SIGKILL, a node gone) every model it held waits that long once (default 10 s).
      stickyQueueScheduleToStartTimeout: STICKY_TIMEOUT,
      shutdownGraceTime: config.shutdownGraceMs,
      shutdownForceTime: config.shutdownGraceMs + FORCE_AFTER_GRACE_MS,
    });
    const tenantWorkers = config.nexus
      ? await createTenantWorkers(connection, config, (refusal) => {
          metrics.tenantRefused(refusal.tenant, refusal.operation);
          logger.warn('tenant request refused', { ...refusal });
        })
      : [];
    const all = [worker, ...tenantWorkers];
    const readiness: Record<string, ReadinessCheck> = {
      worker: async () => {
        for (const each of all) {
          const state = each.getState();
          if (state !== 'RUNNING') throw new Error(`the worker is ${state.toLowerCase()}, not polling`);
        }
      },
      temporal: async () => {
        await connection
          .withDeadline(Date.now() + PROBE_DEADLINE_MS, () => connection.workflowService.getSystemInfo({}))
          .catch((err: unknown) => {
            throw new Error(`Temporal at ${config.temporal.address} does not answer: ${(err as Error).message}`);
          });
      },
      ...(real ? { kubernetes: () => real.ping() } : {}),
    };
    return {
      worker,
      client,
      connection,
      readiness,
      async run() {
        // One stops, all stop: a tenant's queue left unpolled would leave its callers waiting.
        const runs = all.map((each) =>
          each.run().finally(() => {
            for (const other of all) if (other.getState() === 'RUNNING') other.shutdown();
          }),
        );
        const results = await Promise.allSettled(runs);
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
      },
      shutdown() {
        for (const each of all) if (each.getState() === 'RUNNING') each.shutdown();
      },
      async close() {
        stopKeeper?.();
        await stopReal?.();
        if (ownConnection) await connection.close();
      },
    };
  } catch (err) {
    stopKeeper?.();
    await stopReal?.().catch(() => undefined);
    if (ownConnection) await connection.close().catch(() => undefined);
    throw err;
  }
}

/**
 * One Nexus-only worker per tenant, on the task queue its endpoint targets (docs/security.md); the command workflows
 * it starts run on the cluster's queue.
 */
async function createTenantWorkers(
  connection: NativeConnection,
  config: WorkerConfig,
  onRefused: TenantHandlerOptions['onRefused'],
): Promise<Worker[]> {
  const workers: Worker[] = [];
  for (const tenant of config.tenants ?? []) {
    workers.push(
      await Worker.create({
        connection,
        namespace: config.temporal.namespace,
        taskQueue: tenant.nexusTaskQueue,
        nexusServices: [tenantModelsHandler(tenant, { taskQueue: config.taskQueue, onRefused })],
        shutdownGraceTime: config.shutdownGraceMs,
      }),
    );
  }
  return workers;
}

/**
 * Around every activity: failed attempts counted by type (with `metrics`), a keep-alive heartbeat every few seconds,
 * so a step whose worker is lost is retried within the heartbeat timeout (ServeModelOptions), and `onAttemptStart`
 * as each attempt begins (the real activities report a retried one to its workflow).
 */
export function activityInterceptors(
  metrics?: FerryMetrics,
  onAttemptStart?: (ctx: ActivityContext) => void,
): ActivityInterceptorsFactory[] {
  return [
    (ctx) => ({
      inbound: {
        async execute(input, next) {
          onAttemptStart?.(ctx);
          const stop = keepAlive(ctx);
          try {
            return await next(input);
          } finally {
            stop();
          }
        },
      },
    }),
    ...(metrics
      ? [(ctx: ActivityContext) => ({ inbound: new ActivityFailureCounter(metrics, ctx.info.activityType) })]
      : []),
  ];
}

/** A bundle given, or the workflows bundled here; webpack's report goes to DEBUG (INFO is for models). */
async function workflowSource(
  config: WorkerConfig,
  overrides: WorkerOverrides,
  logger: Logger,
): Promise<{ workflowBundle: WorkflowBundleOption }> {
  if (overrides.workflowBundle) return { workflowBundle: overrides.workflowBundle };
  return { workflowBundle: await workflowBundleAt(config.workflowBundle, logger) };
}

/** The prebuilt bundle at `path`, else this build's workflows bundled now. */
export async function workflowBundleAt(path: string | undefined, logger: Logger): Promise<WorkflowBundleOption> {
  if (path) return { codePath: path };
  return await bundleFerryWorkflows(quieter(logger));
}

/** The logger with INFO lines demoted to DEBUG. */
function quieter(logger: Logger): Logger {
  return {
    log(level: LogLevel, message: string, meta?: LogMetadata) {
      logger.log(level === 'INFO' ? 'DEBUG' : level, message, meta);
    },
    trace(message, meta) {
      logger.trace(message, meta);
    },
    debug(message, meta) {
      logger.debug(message, meta);
    },
    info(message, meta) {
      logger.debug(message, meta);
    },
    warn(message, meta) {
      logger.warn(message, meta);
    },
    error(message, meta) {
      logger.error(message, meta);
    },
  };
}

// Imported only when needed, so a worker with stub activities never loads the Kubernetes client.
async function loadRealActivities(
  config: WorkerConfig,
  client: Client,
  logger: Logger,
  metrics: FerryMetrics,
  wakes?: () => Promise<boolean>,
): Promise<RealActivities> {
  const { realActivities } = await import('./activities.js');
  return realActivities(config, client, logger, metrics, wakes);
}
