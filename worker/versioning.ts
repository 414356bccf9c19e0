// Worker Versioning (docs/design/upgrades.md): the worker runs as one version of the Worker Deployment `ferry-<cluster>`,
// its build ID the package version and the commit it was built from. A model's run is pinned to the version that started
// it; when the deployment's current version changes, the run continues as new onto it at its next idle moment
// (workflows/serve-model.ts). The keeper below makes the first version of a deployment current, and — once this version
// is current — wakes the runs still pinned to an older one, so they move within a minute instead of at their next look.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Logger } from '@temporalio/worker';
import { modelChangedSignal } from '../workflows/contract/index.js';

/** What `npm run build` writes next to the compiled code (deploy/build/build-info.mjs). */
const BUILD_INFO = new URL('../build-info.json', import.meta.url);
/** The repository root when run from the sources (worker/ → ..). */
const SOURCE_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** A build ID Ferry accepts: Temporal takes any string of up to 255 characters; this one is also safe in names. */
const BUILD_ID = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/;

export interface Versioning {
  /** `ferry-<cluster>`: one Worker Deployment per cluster served, whatever the task queue's partitions. */
  deploymentName: string;
  buildId: string;
}

/** The Worker Deployment of a cluster's workers. */
export function deploymentNameFor(cluster: string): string {
  return `ferry-${cluster}`;
}

/** `FERRY_BUILD_ID` when set; else `<version>-<commit>` from the build's build-info.json, or from git in a checkout. */
export function buildIdOf(given: string | undefined): string {
  if (given !== undefined) {
    if (!BUILD_ID.test(given)) {
      throw new Error(
        `build ID ${JSON.stringify(given)} must be 1–128 letters, digits, ".", "_", "+" or "-", starting with a letter or digit`,
      );
    }
    return given;
  }
  if (existsSync(BUILD_INFO)) {
    const info = JSON.parse(readFileSync(BUILD_INFO, 'utf8')) as { version?: string; commit?: string };
    if (info.version && info.commit) return `${info.version}-${info.commit}`;
  }
  const fromGit = buildIdFromCheckout(SOURCE_ROOT);
  if (fromGit) return fromGit;
  throw new Error('no build ID: this build has no build-info.json and no git checkout; set FERRY_BUILD_ID');
}

/** `<version>-<commit>[-dirty]` of a checkout (the worker run from its sources); undefined without git. */
function buildIdFromCheckout(root: string): string | undefined {
  try {
    const { version } = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { version: string };
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const commit = git('rev-parse', '--short=12', 'HEAD');
    const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
    return `${version}-${commit}${dirty ? '-dirty' : ''}`;
  } catch {
    return undefined;
  }
}

/** How often the keeper looks at the deployment (and, when this version is current, for runs pinned elsewhere). */
const KEEPER_INTERVAL_MS = 30_000;
/**
 * A new current version reaches the task queue's partitions in a few seconds, which the server reports; one that does
 * not report it is given this long.
 */
const PROPAGATION_MS = 10_000;
/**
 * A propagation the server still reports in progress this long after the change is taken as done: the server can
 * lose the report (temporalio/temporal#11842: the state stays IN_PROGRESS for good, the completion never recorded),
 * and the runs would otherwise never be woken. A run that does not see the change yet stays where it is and is woken
 * again.
 */
const STUCK_PROPAGATION_MS = 60_000;
/** Until the server knows the deployment (its first poll), the keeper looks this often. */
const SOON_MS = 1_000;
/** A run still pinned elsewhere this long after its wake (busy in a step, or woken too early) is woken again. */
const REWAKE_AFTER_MS = 30_000;
/** Runs woken per round: a large fleet moves over a few rounds instead of in one burst of workflow tasks. */
const WAKES_PER_ROUND = 200;

export interface KeeperOptions {
  intervalMs?: number;
  propagationMs?: number;
  /** How long an IN_PROGRESS propagation is waited for before the runs are woken anyway (STUCK_PROPAGATION_MS). */
  stuckPropagationMs?: number;
  rewakeAfterMs?: number;
}

export interface VersionKeeper {
  /**
   * Whether this version is the deployment's current one, after the keeper's first look (true until it can tell, if
   * the server cannot be asked). The worker's watch wakes models only while it is: the current version's workers
   * watch for the whole deployment, and a version started beside it would only double their wakes (or, started
   * fresh, wake every model at its first list).
   */
  isCurrent(): Promise<boolean>;
  stop(): void;
}

/**
 * Looks after this worker's version until stopped: makes it current when the deployment has no current version (a
 * first install; later versions are made current by the operator, after the replay gate), and, while it is current,
 * wakes the open ServeModelWorkflow runs pinned to other versions of the deployment so each moves at its next idle
 * moment. Errors are logged and tried again next round.
 */
export function keepVersion(
  client: Client,
  namespace: string,
  versioning: Versioning,
  logger: Logger,
  options: KeeperOptions = {},
): VersionKeeper {
  const { deploymentName, buildId } = versioning;
  const interval = options.intervalMs ?? KEEPER_INTERVAL_MS;
  const propagation = options.propagationMs ?? PROPAGATION_MS;
  const rewakeAfter = options.rewakeAfterMs ?? REWAKE_AFTER_MS;
  const stuckAfter = options.stuckPropagationMs ?? STUCK_PROPAGATION_MS;
  /** The change whose propagation was taken as done without the server's word (warned once). */
  let warnedFor = 0;
  const recentlyWoken = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let current = true;
  let known: () => void = () => undefined;
  const firstLook = new Promise<void>((resolve) => (known = resolve));

  /** One look; false when the deployment is not known yet (look again soon). */
  const round = async (): Promise<boolean> => {
    const described = await client.workflowService
      .describeWorkerDeployment({ namespace, deploymentName })
      .catch((err: { code?: number }) => {
        if (err.code === 5) return undefined; // NOT_FOUND: no poller of this version has reached the server yet
        throw err;
      });
    if (!described) return false;
    const routing = described.workerDeploymentInfo?.routingConfig;
    const currentBuildId = routing?.currentDeploymentVersion?.buildId;
    if (!currentBuildId) {
      await client.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName,
        buildId,
        identity: `ferry-worker ${buildId}`,
      });
      logger.info('made this version current: the deployment had none', { deploymentName, buildId });
      current = true;
      return true;
    }
    current = currentBuildId === buildId;
    known();
    if (!current) return true;
    // A run woken before the new routing reaches its task queue's partitions does not see the change: it looks, on
    // the old version. The server says when it has propagated, and a little time more is given (seen on the dev
    // server: a run woken 3 s after the change, propagation reported complete, still did not see it).
    const changedTime = routing?.currentVersionChangedTime;
    const changedAt = Number(changedTime?.seconds ?? 0) * 1000 + Math.floor((changedTime?.nanos ?? 0) / 1e6);
    const state = described.workerDeploymentInfo?.routingConfigUpdateState;
    const since = Date.now() - changedAt;
    const completed =
      !state || state === proto.temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED;
    if (!(completed ? since >= propagation : since >= stuckAfter)) return true;
    if (!completed && warnedFor !== changedAt) {
      warnedFor = changedAt;
      logger.warn(
        'the deployment still reports its routing change in progress; waking the runs pinned elsewhere anyway',
        {
          deploymentName,
          buildId,
          routingConfigUpdateState: state,
          sinceChangeMs: since,
          see: 'https://github.com/temporalio/temporal/issues/11842',
        },
      );
    }
    const query =
      `WorkflowType = 'ServeModelWorkflow' AND ExecutionStatus = 'Running' AND ` +
      `TemporalWorkerDeployment = '${deploymentName}' AND ` +
      `TemporalWorkerDeploymentVersion != '${deploymentName}:${buildId}'`;
    let woken = 0;
    const now = Date.now();
    for (const [runId, at] of recentlyWoken) if (now - at > rewakeAfter) recentlyWoken.delete(runId);
    for await (const run of client.workflow.list({ query })) {
      if (stopped || woken >= WAKES_PER_ROUND) break;
      // Visibility lags: a run woken a moment ago may still be listed, and a run that has just moved may be listed
      // with the search attributes its predecessor passed on. Its own description says where it is pinned.
      if (recentlyWoken.has(run.runId)) continue;
      const handle = client.workflow.getHandle(run.workflowId, run.runId);
      const info = await handle.describe().then(
        (d) => d.raw.workflowExecutionInfo?.versioningInfo,
        () => undefined,
      );
      const pinnedElsewhere =
        info?.behavior === proto.temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_PINNED &&
        info.deploymentVersion?.buildId !== buildId;
      if (!pinnedElsewhere) continue;
      recentlyWoken.set(run.runId, now);
      await handle
        .signal(modelChangedSignal, { objects: [] })
        .then(() => woken++)
        .catch(() => undefined); // ended meanwhile
    }
    if (woken > 0) logger.info('woke runs pinned to older versions, to move here', { deploymentName, buildId, woken });
    return true;
  };

  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      round()
        .catch((err: unknown) => {
          logger.warn('worker versioning: cannot look at the deployment', { deploymentName, error: err });
          return true;
        })
        .then(
          (settled) => {
            if (settled) known();
            schedule(settled ? interval : SOON_MS);
          },
          () => schedule(interval),
        );
    }, ms);
    timer.unref();
  };
  // The first look waits for the worker's pollers to make the version known to the server.
  schedule(SOON_MS);
  return {
    isCurrent: async () => {
      await firstLook;
      return current;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      known();
    },
  };
}

/**
 * `ferry-worker --make-current`: makes this version the deployment's current one, waiting (up to `timeoutMs`) for the
 * server to know it — it does once one of its workers has polled. Throws with the server's last answer on timeout.
 */
export async function makeCurrent(
  client: Client,
  namespace: string,
  versioning: Versioning,
  timeoutMs = 300_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await client.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        ...versioning,
        identity: `ferry-worker --make-current ${versioning.buildId}`,
      });
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(
          `${versioning.deploymentName} version ${versioning.buildId} could not be made current in ${Math.round(timeoutMs / 1000)} s (is a worker of it running?): ${(err as Error).message}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, SOON_MS));
    }
  }
}
