import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { Cluster } from '../../activities/cluster/api.js';
import type { ActivityDeps, ActivityTiming } from '../../activities/deps.js';
import {
  parseServedModel,
  type ServedModel,
  type ServedModelInput,
  type StepProgress,
} from '../../workflows/contract/index.js';
import { adminKubeConfig } from './kube.js';

/** Short intervals so the tests see waits, retries and heartbeats in seconds. */
export const TEST_TIMING: ActivityTiming = {
  pollMs: 300,
  terminatingPvcWaitMs: 20_000,
  progressIntervalMs: 0,
  volumeBindGraceMs: 5_000,
  deletionWaitMs: 30_000,
};

export function testDeps(timing: Partial<ActivityTiming> = {}): ActivityDeps {
  return {
    cluster: new Cluster(adminKubeConfig()),
    endpoints: async () => {
      throw new Error('no engine in these tests');
    },
    timing: { ...TEST_TIMING, ...timing },
  };
}

/** One activity run in a MockActivityEnvironment, with the heartbeats it sent. */
export interface ActivityRun<R> {
  env: MockActivityEnvironment;
  heartbeats: StepProgress[];
  result: Promise<R>;
}

/** An activity run scheduled now, as a first attempt would be (budgets such as awaitHealth's start there). */
export function runActivity<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): ActivityRun<R> {
  return runScheduled(0, fn, ...args);
}

/** An activity run whose first attempt was scheduled `scheduledAgoMs` ago; this attempt starts now. */
export function runScheduled<A extends unknown[], R>(
  scheduledAgoMs: number,
  fn: (...args: A) => Promise<R>,
  ...args: A
): ActivityRun<R> {
  // Failing activities are the point of many tests: log only errors.
  const env = new MockActivityEnvironment(
    { scheduledTimestampMs: Date.now() - scheduledAgoMs, currentAttemptScheduledTimestampMs: Date.now() },
    { logger: new DefaultLogger('ERROR') },
  );
  const heartbeats: StepProgress[] = [];
  env.on('heartbeat', (details: StepProgress) => heartbeats.push(details));
  const result = env.run<A, R, typeof fn>(fn, ...args);
  // Tests await it later; an early rejection must not count as unhandled.
  result.catch(() => undefined);
  return { env, heartbeats, result };
}

/** Runs an activity to completion in its own MockActivityEnvironment. */
export function activity<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return runActivity(fn, ...args).result;
}

/** A small model served from Hugging Face in `namespace`; `spec` overrides parts of the spec. */
export function testModel(
  name: string,
  namespace: string,
  options: { labels?: Record<string, string>; spec?: Partial<ServedModelInput['spec']> } = {},
): ServedModel {
  return parseServedModel({
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name, namespace, labels: options.labels ?? {} },
    spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } }, ...options.spec },
  });
}

/** The rejection of `promise` (fails the test when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected the activity to fail, but it succeeded');
}
