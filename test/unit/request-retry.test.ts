import { ApiException } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import {
  certainlyNotApplied,
  DEFAULT_RETRY_POLICY,
  isTransient,
  outcomeUnknown,
  retryDelayMs,
  withRetries,
  type RetryNote,
} from '../../activities/cluster/request-retry.js';
import { reportRetriedAttempt, retryProgress } from '../../activities/cluster/retry-progress.js';
import { Context } from '@temporalio/activity';
import type { StepProgress } from '../../workflows/contract/index.js';

const http = (code: number, headers: Record<string, string> = {}) =>
  new ApiException(code, 'Unsuccessful HTTP Request', JSON.stringify({ message: `the server said ${code}` }), headers);
const network = (code: string, sent?: boolean) =>
  Object.assign(new Error(`request to https://api/x failed, reason: ${code}`), {
    code,
    ...(sent === undefined ? {} : { sent }),
  });

/** A clock that only sleeps move. */
function fakeTime() {
  const clock = { t: 0, sleeps: [] as number[] };
  return {
    clock,
    now: () => clock.t,
    sleep: async (ms: number) => {
      clock.sleeps.push(ms);
      clock.t += ms;
    },
  };
}

describe('which failures are transient', () => {
  it('network errors and 429, 500, 502, 503, 504 are; what the API server meant is not', () => {
    for (const code of ['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE'])
      expect(isTransient(network(code))).toBe(true);
    expect(isTransient(new Error('socket hang up'))).toBe(true);
    expect(
      isTransient(Object.assign(new Error('network timeout at: https://api/x'), { type: 'request-timeout' })),
    ).toBe(true);
    // node-fetch puts the system error's code on the error, some wrappers on its cause.
    expect(isTransient(new Error('fetch failed', { cause: network('ECONNRESET') }))).toBe(true);
    for (const code of [429, 500, 502, 503, 504]) expect(isTransient(http(code))).toBe(true);
    for (const code of [400, 401, 403, 404, 405, 409, 410, 422]) expect(isTransient(http(code))).toBe(false);
    expect(isTransient(new Error('Unable to determine type of Kubernetes type of response.'))).toBe(false);
    expect(isTransient(ApplicationFailure.retryable('request timed out', 'KubernetesUnreachable'))).toBe(false);
  });

  it('a write certainly did not happen only when the server refused it or it was never sent', () => {
    expect(certainlyNotApplied(http(429))).toBe(true);
    expect(certainlyNotApplied(http(503))).toBe(true);
    expect(certainlyNotApplied(network('ECONNREFUSED'))).toBe(true);
    expect(certainlyNotApplied(network('ECONNRESET', false))).toBe(true);
    expect(certainlyNotApplied(network('ECONNRESET', true))).toBe(false);
    expect(certainlyNotApplied(network('ECONNRESET'))).toBe(false);
    expect(certainlyNotApplied(network('ETIMEDOUT', true))).toBe(false);
    expect(certainlyNotApplied(http(500))).toBe(false);

    expect(outcomeUnknown(network('ECONNRESET', true))).toBe(true);
    expect(outcomeUnknown(network('ETIMEDOUT', true))).toBe(true);
    for (const code of [500, 502, 504]) expect(outcomeUnknown(http(code))).toBe(true);
    for (const code of [429, 503, 404, 409, 422]) expect(outcomeUnknown(http(code))).toBe(false);
    expect(outcomeUnknown(network('ECONNREFUSED'))).toBe(false);
  });
});

describe('the backoff', () => {
  const policy = DEFAULT_RETRY_POLICY;

  it('is full jitter below a ceiling that doubles from 200 ms up to 5 s', () => {
    const top = () => 0.999_999;
    expect([1, 2, 3, 4, 5, 6, 7, 12].map((n) => retryDelayMs(n, http(503), policy, top))).toEqual([
      199, 399, 799, 1599, 3199, 4999, 4999, 4999,
    ]);
    expect(retryDelayMs(4, http(503), policy, () => 0)).toBe(0);
    expect(retryDelayMs(4, http(503), policy, () => 0.5)).toBe(800);
    // Spread out: a thousand draws of the third retry cover its range.
    const draws = Array.from({ length: 1000 }, () => retryDelayMs(3, http(500), policy));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(800);
    expect(Math.max(...draws) - Math.min(...draws)).toBeGreaterThan(600);
  });

  it("never retries sooner than the server's Retry-After, honoured up to 10 s", () => {
    expect(retryDelayMs(1, http(429, { 'retry-after': '1' }), policy, () => 0)).toBe(1_000);
    expect(retryDelayMs(1, http(429, { 'retry-after': '1' }), policy, () => 0.999)).toBe(1_000);
    expect(retryDelayMs(7, http(429, { 'retry-after': '1' }), policy, () => 0.999)).toBe(4_995);
    expect(retryDelayMs(1, http(503, { 'retry-after': '3' }), policy, () => 0)).toBe(3_000);
    expect(retryDelayMs(1, http(429, { 'retry-after': '120' }), policy, () => 0)).toBe(10_000);
    expect(retryDelayMs(1, http(429, { 'retry-after': 'soon' }), policy, () => 0)).toBe(0);
  });
});

describe('withRetries', () => {
  it("rides out transient failures and tells of each retry in Ferry's words", async () => {
    const { clock, now, sleep } = fakeTime();
    const notes: RetryNote[] = [];
    const failures = [http(503), network('ECONNRESET', true), http(429, { 'retry-after': '1' })];
    let calls = 0;
    const result = await withRetries(
      'reading ConfigMap ns/x',
      async (n) => {
        calls++;
        expect(n).toBe(calls);
        const next = failures.shift();
        if (next) throw next;
        return 'ok';
      },
      { now, sleep, random: () => 0.5, onRetry: (note) => notes.push(note) },
    );
    expect(result).toBe('ok');
    expect(calls).toBe(4);
    expect(notes.map((n) => [n.reason, n.attempt, n.delayMs])).toEqual([
      ['KubernetesHttp503', 1, 100],
      ['KubernetesUnreachable', 2, 200],
      ['KubernetesHttp429', 3, 1_000],
    ]);
    expect(notes[0]!.doing).toBe('reading ConfigMap ns/x');
    expect(notes[0]!.message).toBe('reading ConfigMap ns/x: the server said 503');
    expect(notes[1]!.message).toMatch(/^reading ConfigMap ns\/x: request to .* failed, reason: ECONNRESET$/);
    expect(clock.sleeps).toEqual([100, 200, 1_000]);
  });

  it('throws what no retry fixes at once, unchanged', async () => {
    const { clock, now, sleep } = fakeTime();
    const notes: RetryNote[] = [];
    for (const refused of [http(403), http(422), http(404), http(409), new TypeError('a bug')]) {
      let calls = 0;
      const thrown = await withRetries(
        'applying x',
        async () => {
          calls++;
          throw refused;
        },
        { now, sleep, onRetry: (n) => notes.push(n) },
      ).catch((err: unknown) => err);
      expect(thrown).toBe(refused);
      expect(calls).toBe(1);
    }
    expect(notes).toEqual([]);
    expect(clock.sleeps).toEqual([]);
  });

  it('makes its last retry when the budget ends, then gives up with the last failure', async () => {
    const { clock, now, sleep } = fakeTime();
    const errors: unknown[] = [];
    const thrown = await withRetries(
      'listing Pod in ns',
      async () => {
        const err = http(503);
        errors.push(err);
        throw err;
      },
      { now, sleep, policy: { ...DEFAULT_RETRY_POLICY, budgetMs: 10_000 }, random: () => 0.999 },
    ).catch((err: unknown) => err);
    expect(thrown).toBe(errors.at(-1));
    // 199 + 399 + 799 + 1598 + 3196 = 6191; the next, 4995, is cut to the 3809 left.
    expect(clock.sleeps).toEqual([199, 399, 799, 1_598, 3_196, 3_809]);
    expect(clock.t).toBe(10_000);
    expect(errors).toHaveLength(7);
  });

  it('does not retry before a Retry-After that the budget cannot wait for', async () => {
    const { clock, now, sleep } = fakeTime();
    let calls = 0;
    await expect(
      withRetries(
        'reading x',
        async () => {
          calls++;
          throw http(429, { 'retry-after': '2' });
        },
        { now, sleep, policy: { ...DEFAULT_RETRY_POLICY, budgetMs: 5_000 } },
      ),
    ).rejects.toMatchObject({ code: 429 });
    // At 0, 2 and 4 s; at 4 s only 1 s is left, less than the 2 s asked.
    expect(clock.sleeps).toEqual([2_000, 2_000]);
    expect(calls).toBe(3);
  });

  it('counts time spent in attempts against the budget (a hung request)', async () => {
    const { clock, now, sleep } = fakeTime();
    let calls = 0;
    await expect(
      withRetries(
        'reading x',
        async () => {
          calls++;
          clock.t += 15_000; // each attempt times out after 15 s
          throw network('ETIMEDOUT', true);
        },
        { now, sleep, random: () => 0.5 },
      ),
    ).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    // 30 s budget: the first attempt ends at 15 s, the second at 30.1 s, no third.
    expect(calls).toBe(2);
  });

  it('stops retrying when the signal aborts (the activity is cancelled)', async () => {
    const controller = new AbortController();
    let calls = 0;
    const thrown = await withRetries(
      'reading x',
      async () => {
        calls++;
        throw http(500);
      },
      { signal: controller.signal, sleep: async () => controller.abort() },
    ).catch((err: unknown) => err);
    expect(thrown).toMatchObject({ code: 500 });
    expect(calls).toBe(1);
  });

  it('a custom predicate decides what is retried', async () => {
    const { now, sleep } = fakeTime();
    let calls = 0;
    const result = await withRetries(
      'applying x',
      async () => {
        if (++calls === 1) throw http(409);
        return calls;
      },
      { now, sleep, retryable: (err) => isTransient(err) || (err as { code?: number }).code === 409 },
    );
    expect(result).toBe(2);
  });
});

describe('retryProgress', () => {
  const note = (attempt: number): RetryNote => ({
    doing: 'reading Job ns/m-pull-1',
    reason: 'KubernetesHttp503',
    message: 'reading Job ns/m-pull-1: the server is currently unable to handle the request',
    attempt,
    delayMs: 400,
  });

  /** Runs `body` as activity `activityType`; returns what reached the sink and what was heartbeated. */
  async function inActivity(
    activityType: string,
    body: (report: (n: RetryNote) => void, tick: (ms: number) => void) => void,
  ) {
    const sent: { workflowId: string; progress: StepProgress }[] = [];
    let t = 0;
    const report = retryProgress(
      async ({ workflowId }, progress) => void sent.push({ workflowId, progress }),
      2_000,
      () => t,
    );
    const env = new MockActivityEnvironment(
      { activityType, workflowExecution: { workflowId: 'wf', runId: 'run' } },
      { logger: new DefaultLogger('ERROR') },
    );
    const heartbeats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => heartbeats.push(d));
    await env.run(async () => body(report, (ms) => (t += ms)));
    return { sent, heartbeats };
  }

  it("reports a retry at once as the step's waiting reason, then at most every 2 s, without a heartbeat", async () => {
    const { sent, heartbeats } = await inActivity('awaitPuller', (report, tick) => {
      report(note(1));
      tick(500);
      report(note(2));
      tick(1_499);
      report(note(3));
      tick(1);
      report(note(4));
    });
    expect(sent).toEqual([
      {
        workflowId: 'wf',
        progress: {
          step: 'download',
          state: 'KubernetesHttp503',
          message:
            'reading Job ns/m-pull-1: the server is currently unable to handle the request (retry 1, next in 0.4 s)',
        },
      },
      expect.objectContaining({ progress: expect.objectContaining({ message: expect.stringContaining('(retry 4,') }) }),
    ]);
    // awaitPuller resumes from its heartbeat details: a retry must not replace them.
    expect(heartbeats).toEqual([]);
  });

  it('reports under the progress step of each activity; steps that take no reports get none', async () => {
    const stepOf = async (activityType: string) =>
      (await inActivity(activityType, (r) => r(note(1)))).sent[0]?.progress.step;
    expect(await stepOf('claimName')).toBe('claim');
    expect(await stepOf('applyStorage')).toBe('storage');
    expect(await stepOf('startPuller')).toBe('download');
    expect(await stepOf('releaseVolume')).toBe('release');
    expect(await stepOf('scaleEngine')).toBe('stop');
    expect(await stepOf('applyEngine')).toBe('rollout');
    expect(await stepOf('awaitRollout')).toBe('rollout');
    expect(await stepOf('awaitHealth')).toBe('startup');
    expect(await stepOf('tearDown')).toBe('teardown');
    for (const none of ['lookAtModel', 'readStatus']) expect(await stepOf(none)).toBeUndefined();
  });

  it('does nothing outside an activity (the worker watch, Kubernetes Events)', () => {
    const sent: unknown[] = [];
    const report = retryProgress(async (_w, p) => void sent.push(p));
    expect(() => report(note(1))).not.toThrow();
    expect(sent).toEqual([]);
  });
});

describe('reportRetriedAttempt', () => {
  async function startAttempt(activityType: string, attempt: number) {
    const sent: { workflowId: string; progress: StepProgress }[] = [];
    const env = new MockActivityEnvironment(
      { activityType, attempt, workflowExecution: { workflowId: 'wf', runId: 'run' } },
      { logger: new DefaultLogger('ERROR') },
    );
    await env.run(async () =>
      reportRetriedAttempt(
        async ({ workflowId }, progress) => void sent.push({ workflowId, progress }),
        Context.current(),
      ),
    );
    return sent;
  }

  it("says a retried attempt is under way as its step's waiting reason, instead of the lost attempt's last state", async () => {
    expect(await startAttempt('awaitPuller', 2)).toEqual([
      {
        workflowId: 'wf',
        progress: {
          step: 'download',
          state: 'Retrying',
          message: 'attempt 2 of awaitPuller: the previous attempt did not finish (its worker was lost, or it failed)',
        },
      },
    ]);
    expect((await startAttempt('tearDown', 3))[0]?.progress).toMatchObject({ step: 'teardown', state: 'Retrying' });
  });

  it('says nothing for a first attempt, or for an activity that takes no reports', async () => {
    expect(await startAttempt('awaitPuller', 1)).toEqual([]);
    expect(await startAttempt('lookAtModel', 2)).toEqual([]);
  });
});
