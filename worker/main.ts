// The worker process: `node --import tsx worker/main.ts [--cluster NAME]`. JSON logs on stdout; SIGTERM or SIGINT
// drains it (in-flight activities get the grace period, then are cancelled and retried by another worker).
import { DefaultLogger, Runtime } from '@temporalio/worker';
import {
  parseWorkerConfig,
  redactWorkerConfig,
  WORKER_USAGE,
  WorkerConfigError,
  type ReplayCheckConfig,
  type WorkerConfig,
} from './config.js';
import { createWorker, workflowBundleAt } from './create-worker.js';
import { startHealthServer, type HealthServer } from './health.js';
import { JsonLogger } from './logger.js';
import { DURATION_BUCKETS, DURATION_HISTOGRAMS } from './metrics.js';
import { runOneShot } from './one-shot.js';
import { replayCheck, ReplayInputError } from './replay-check.js';

async function main(): Promise<number> {
  let config: WorkerConfig | ReplayCheckConfig | 'help';
  try {
    config = parseWorkerConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (!(err instanceof WorkerConfigError)) throw err;
    new JsonLogger().error('invalid configuration', { error: err.message });
    process.stderr.write(`\n${WORKER_USAGE}`);
    return 2;
  }
  if (config === 'help') {
    process.stdout.write(WORKER_USAGE);
    return 0;
  }
  if ('replayCheck' in config) return await runReplayCheck(config);
  if (config.command) return await runOneShot({ ...config, command: config.command });

  const logger = new JsonLogger(config.logLevel, undefined, { component: 'ferry-worker', cluster: config.cluster });
  Runtime.install({
    logger,
    // Signals are handled below, so that shutting down is logged and a second signal can cut it short.
    shutdownSignals: [],
    telemetryOptions: {
      logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
      ...(config.metricsAddress
        ? {
            metrics: {
              prometheus: {
                bindAddress: config.metricsAddress,
                histogramBucketOverrides: Object.fromEntries(DURATION_HISTOGRAMS.map((n) => [n, DURATION_BUCKETS])),
              },
            },
          }
        : {}),
    },
  });
  logger.info('starting', { config: redactWorkerConfig(config) });

  let ferry;
  try {
    ferry = await createWorker(config, { logger });
  } catch (err) {
    logger.error('cannot start the worker', { address: config.temporal.address, error: err });
    return 1;
  }

  let health: HealthServer | undefined;
  if (config.healthAddress) {
    try {
      health = await startHealthServer(config.healthAddress, ferry.readiness);
    } catch (err) {
      logger.error('cannot serve the health endpoints', { address: config.healthAddress, error: err });
      await ferry.close();
      return 1;
    }
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn('second signal: exiting without waiting for in-flight activities', { signal });
      process.exit(130);
    }
    stopping = true;
    logger.info('shutting down: no new tasks; in-flight activities may finish', {
      signal,
      graceMs: config.shutdownGraceMs,
    });
    ferry.shutdown();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  logger.info('polling', {
    taskQueue: config.taskQueue,
    ...(config.tenants ? { tenantQueues: config.tenants.map((t) => t.nexusTaskQueue) } : {}),
    namespace: config.temporal.namespace,
    address: config.temporal.address,
    ...(health ? { health: health.address } : {}),
    ...(config.metricsAddress ? { metrics: config.metricsAddress } : {}),
  });
  try {
    await ferry.run();
  } finally {
    await health?.close();
    await ferry.close();
  }
  logger.info('stopped');
  return 0;
}

/** `--replay-check DIR`: one line per history on stdout, a summary last; 0 all replay, 1 one does not, 2 no input. */
async function runReplayCheck(config: ReplayCheckConfig): Promise<number> {
  const logger = new JsonLogger('WARN', undefined, { component: 'ferry-worker', mode: 'replay-check' });
  Runtime.install({ logger: new DefaultLogger('ERROR'), shutdownSignals: [] });
  try {
    const outcomes = await replayCheck(config.replayCheck, await workflowBundleAt(config.workflowBundle, logger));
    for (const o of outcomes) {
      const what = `${o.file}${o.workflowType ? ` (${o.workflowType})` : ''}`;
      process.stdout.write(o.error ? `FAIL ${what}: ${o.error}\n` : `ok   ${what}\n`);
    }
    const failed = outcomes.filter((o) => o.error).length;
    process.stdout.write(`${outcomes.length - failed} replayed, ${failed} failed\n`);
    return failed > 0 ? 1 : 0;
  } catch (err) {
    if (!(err instanceof ReplayInputError)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    return 2;
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    new JsonLogger().error('worker failed', { error: err });
    process.exitCode = 1;
  },
);
