// A worker without the watch (FERRY_WATCH=off, a Role without list/watch) wakes every model itself on a clock: the
// workflow's own safety net is hours apart, trusting a watch that this worker does not run.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Logger } from '@temporalio/worker';
import { modelChangedSignal, runningOnCluster } from '../workflows/contract/index.js';

/** How often a worker without the watch (FERRY_WATCH=off) wakes every model of its cluster. */
export const WATCHLESS_LOOK_MS = 30 * 60_000;

/**
 * Wakes every running model of `cluster` each `intervalMs` (a `modelChanged` signal naming no object: the workflow
 * looks): 2 billed actions per model and interval, what the safety net cost before the watch was trusted. Only while
 * `wakes` says so (the current version's workers). Returns a stop.
 */
export function wakeEveryModel(
  cluster: string,
  client: Pick<Client, 'workflow'>,
  logger: Pick<Logger, 'warn'>,
  intervalMs: number,
  wakes?: () => Promise<boolean>,
): () => void {
  const query = runningOnCluster(cluster);
  const once = async () => {
    if (wakes && !(await wakes())) return;
    try {
      for await (const execution of client.workflow.list({ query })) {
        await client.workflow
          .getHandle(execution.workflowId)
          .signal(modelChangedSignal, { objects: [] })
          .catch((err: unknown) => {
            if (!(err instanceof WorkflowNotFoundError)) throw err;
          });
      }
    } catch (err) {
      logger.warn('cannot wake the models (FERRY_WATCH=off); trying again next interval', { error: String(err) });
    }
  };
  const timer = setInterval(() => void once(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
