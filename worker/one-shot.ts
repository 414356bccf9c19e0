// The worker's one-shot commands, which connect to Temporal, do one thing and exit: the replay gate over the open
// runs (`--replay-check-open`) and making this version current (`--make-current`). The Helm chart's upgrade hooks run
// them (docs/upgrading.md); an operator can too.
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { connectOptionsOf } from '../client/temporal-env.js';
import type { WorkerConfig } from './config.js';
import { workflowBundleAt } from './create-worker.js';
import { JsonLogger } from './logger.js';
import { replayOpenRuns } from './replay-check.js';
import { makeCurrent } from './versioning.js';

/** Runs `config.command`; the exit code: 0 done, 1 a run does not replay or the version cannot be made current. */
export async function runOneShot(
  config: WorkerConfig & { command: NonNullable<WorkerConfig['command']> },
): Promise<number> {
  const logger = new JsonLogger('WARN', undefined, { component: 'ferry-worker', mode: config.command });
  Runtime.install({ logger: new DefaultLogger('ERROR'), shutdownSignals: [] });
  const connection = await Connection.connect(connectOptionsOf(config.temporal));
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    if (config.command === 'make-current') {
      const versioning = config.versioning!;
      try {
        await makeCurrent(client, config.temporal.namespace, versioning);
      } catch (err) {
        process.stderr.write(`error: ${(err as Error).message}\n`);
        return 1;
      }
      process.stdout.write(`${versioning.deploymentName}: ${versioning.buildId} is the current version\n`);
      return 0;
    }
    const bundle = await workflowBundleAt(config.workflowBundle, logger);
    const { outcomes, pinned } = await replayOpenRuns(client, config.taskQueue, bundle);
    for (const o of outcomes) {
      const what = `${o.file}${o.workflowType ? ` (${o.workflowType})` : ''}`;
      process.stdout.write(o.error ? `FAIL ${what}: ${o.error}\n` : `ok   ${what}\n`);
    }
    const failed = outcomes.filter((o) => o.error).length;
    const left = pinned > 0 ? `; ${pinned} pinned to their version, not replayed here` : '';
    process.stdout.write(`${outcomes.length - failed} replayed, ${failed} failed${left}\n`);
    return failed > 0 ? 1 : 0;
  } finally {
    await connection.close();
  }
}
