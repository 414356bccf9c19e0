// The workflow's knobs with their defaults, and the activities with the timeouts of each kind of step.
import { isCancellation, proxyActivities, type ActivityOptions, type RetryPolicy } from '@temporalio/workflow';
import {
  NON_RETRYABLE,
  parseDuration,
  type FerryActivities,
  type ServedModel,
  type ServeModelOptions,
} from './contract/index.js';

/**
 * How long any one short step (an apply, a delete, a look) may take. Like the long waits, short steps heartbeat
 * (the worker's keep-alive, from their third second on), so one whose worker was lost is retried within the heartbeat
 * timeout rather than after this.
 */
const SHORT_STEP_TIMEOUT_MS = 2 * 60_000;
const TEARDOWN_TIMEOUT_MS = 5 * 60_000;
/** A load measurement's bound in time (its bound in load is `spec.slo.maxConcurrency`). */
const MEASURE_TIMEOUT_MS = 10 * 60_000;

/**
 * The safety net's look at a quiet Ready model: 6 h, 4 looks a day, 8 billed actions and about 44 history events (bars:
 * 10 and 5 an hour). The worker's watch wakes a model on every change to its objects, again after a gap in the watch
 * for those whose objects differ, and every model once when a worker starts; a worker without the watch wakes every
 * model each 30 min itself (FERRY_WATCH=off). What is left for the net: what no watch sees (a deleted InferencePool).
 */
const SAFETY_NET_MS = 6 * 3_600_000;

export interface ResolvedOptions {
  watchIntervalMs: number;
  safetyNetIntervalMs: number;
  continueAsNewAfterEvents: number;
  initialIntervalMs: number;
  maximumIntervalMs: number;
  maximumAttempts: number;
  timeoutMarginMs: number;
  heartbeatTimeoutMs: number;
  healthGateWindowMs: number;
}

export function resolveOptions(options: ServeModelOptions = {}): ResolvedOptions {
  return {
    watchIntervalMs: options.watchIntervalMs ?? 30_000,
    safetyNetIntervalMs: options.safetyNetIntervalMs ?? SAFETY_NET_MS,
    continueAsNewAfterEvents: options.continueAsNewAfterEvents ?? 5_000,
    initialIntervalMs: options.retry?.initialIntervalMs ?? 1_000,
    maximumIntervalMs: options.retry?.maximumIntervalMs ?? 30_000,
    maximumAttempts: options.retry?.maximumAttempts ?? 10,
    timeoutMarginMs: options.timeoutMarginMs ?? 5 * 60_000,
    heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 10_000,
    healthGateWindowMs: options.healthGateWindowMs ?? 30_000,
  };
}

/** The workflow's own backoff between attempts of a step (and of teardown). */
export function backoffMs(attempt: number, options: ResolvedOptions): number {
  return Math.min(options.initialIntervalMs * 2 ** Math.min(attempt - 1, 20), options.maximumIntervalMs);
}

export type Activities = ReturnType<typeof activitiesFor>;

/**
 * Names each activity a run schedules after what it is for: `<activity>/<generation>/<n>`, where n counts the calls of
 * that activity for that generation that came back with a result or a failure (a cancelled one is not counted).
 *
 * Why not the SDK's default (a sequence number per scheduled activity): a query that reaches a worker without the
 * workflow in its cache is answered by replaying the history, and that replay runs the handlers of signals recorded
 * after the last workflow task — a watch's wake, say — so the workflow may schedule a look there. If the next task
 * then brings an update, the update cancels that look before it was ever sent, and the activity the update needs takes
 * the next number. A later replay sees the signal and the update in one activation, never schedules the look, and
 * numbers the update's activity one lower: `[TMPRL1100] Nondeterminism error: Activity id of scheduled event '10' does
 * not match activity id of activity command '9'`, and the model's workflow is stuck on every worker (found by the
 * chaos suite; test/integration/workflow/split-activations.test.ts replays it). An activity cancelled before it was
 * sent leaves no trace in these names, so both ways of running the same events name the same activities the same.
 * Within a generation a cancelled call is never followed by another of the same activity (an update or a delete
 * cancels, and either moves to the next generation or ends the looks), so no two are pending under one name.
 */
export class ActivityIds {
  private readonly answered = new Map<string, number>();

  /** `enabled` false: the SDK's numbers, for runs from before these names (their histories hold the numbers). */
  constructor(private readonly enabled: boolean) {}

  /** Runs one call of `activity` for `generation` under its name, and counts it once it is answered. */
  async call<T>(activity: string, generation: number, run: (activityId?: string) => Promise<T>): Promise<T> {
    if (!this.enabled) return await run();
    const key = `${activity}/${generation}`;
    try {
      const result = await run(`${key}/${(this.answered.get(key) ?? 0) + 1}`);
      this.count(key);
      return result;
    } catch (err) {
      if (!isCancellation(err)) this.count(key);
      throw err;
    }
  }

  private count(key: string): void {
    this.answered.set(key, (this.answered.get(key) ?? 0) + 1);
  }
}

/** How the activities of one piece of work are named: the run's names, and the generation the work is for. */
export interface Naming {
  ids: ActivityIds;
  generation: number;
}

/** `proxyActivities`, each call named by `naming` (the SDK's sequence numbers in runs from before the names). */
function proxy(options: ActivityOptions, { ids, generation }: Naming): FerryActivities {
  return new Proxy({} as FerryActivities, {
    get(_, activity) {
      if (typeof activity !== 'string') return undefined;
      return (input: never) =>
        ids.call(activity, generation, (activityId) => {
          const acts = proxyActivities<FerryActivities>({ ...options, activityId });
          return (acts[activity as keyof FerryActivities] as (input: never) => Promise<unknown>)(input);
        });
    },
  });
}

/** The activities with the timeouts of each kind of step; long waits get their budget from the spec. */
export function activitiesFor(spec: ServedModel, options: ResolvedOptions, naming: Naming) {
  const retry: RetryPolicy = {
    initialInterval: options.initialIntervalMs,
    backoffCoefficient: 2,
    maximumInterval: options.maximumIntervalMs,
    maximumAttempts: options.maximumAttempts,
    nonRetryableErrorTypes: [...NON_RETRYABLE],
  };
  // A long wait retries (a worker restart, a lost heartbeat) for as long as its budget lasts, and no longer.
  const { maximumAttempts: _bounded, ...unbounded } = retry;
  const longWait = (budgetMs: number): ActivityOptions => ({
    startToCloseTimeout: budgetMs,
    scheduleToCloseTimeout: budgetMs,
    heartbeatTimeout: options.heartbeatTimeoutMs,
    retry: unbounded,
  });
  return {
    short: proxy(
      { startToCloseTimeout: SHORT_STEP_TIMEOUT_MS, heartbeatTimeout: options.heartbeatTimeoutMs, retry },
      naming,
    ),
    // A move of the front's requests: its rollout, then its old pods finishing what they hold, each within its grace
    // period (the front's hold).
    shift: proxy(
      {
        startToCloseTimeout: parseDuration(spec.spec.front?.holdFor ?? '0s') + SHORT_STEP_TIMEOUT_MS,
        heartbeatTimeout: options.heartbeatTimeoutMs,
        retry,
      },
      naming,
    ),
    puller: proxy(longWait(parseDuration(spec.spec.puller.deadline) + options.timeoutMarginMs), naming),
    startup: proxy(longWait(parseDuration(spec.spec.engine.startupTimeout) + options.timeoutMarginMs), naming),
    measure: proxy(
      { startToCloseTimeout: MEASURE_TIMEOUT_MS, heartbeatTimeout: options.heartbeatTimeoutMs, retry },
      naming,
    ),
    // One attempt per call: the workflow retries teardown itself, so each failure shows in status.
    teardown: proxy(
      {
        startToCloseTimeout: TEARDOWN_TIMEOUT_MS,
        heartbeatTimeout: options.heartbeatTimeoutMs,
        retry: { ...retry, maximumAttempts: 1 },
      },
      naming,
    ),
  };
}
