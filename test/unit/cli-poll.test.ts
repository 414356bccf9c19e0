// The loop behind status -w and list -w: values on an interval, passing failures retried with a backoff and said
// once per streak, lasting failures and Ctrl-C ending it, the deadline ending it quietly.
import { ServiceError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { poll } from '../../client/cli/poll.js';
import { ModelNotFoundError } from '../../client/errors.js';

const ref = { name: 'qwen', namespace: 'models', cluster: 'default' };

/** A read that answers with `answers` in turn: a value, or an error to throw. */
function reads<T>(answers: (T | Error)[]): { read: () => Promise<T>; calls: () => number } {
  let calls = 0;
  return {
    calls: () => calls,
    read: async () => {
      const answer = answers[Math.min(calls++, answers.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
}

const options = (patch: Partial<Parameters<typeof poll>[2]> = {}) => ({
  intervalMs: 5,
  maxIntervalMs: 40,
  deadline: Date.now() + 10_000,
  signal: new AbortController().signal,
  onRetry: () => undefined,
  ...patch,
});

describe('poll', () => {
  it('hands on each value, retries passing failures with a doubling pause said once per streak', async () => {
    const unavailable = new ServiceError('Failed to query Workflow');
    const { read } = reads<number>([
      1,
      unavailable,
      unavailable,
      unavailable,
      2,
      unavailable,
      3,
      new ModelNotFoundError(ref),
    ]);
    const values: number[] = [];
    const retries: number[] = [];
    await expect(
      poll(read, (v) => values.push(v), options({ onRetry: (_, retryInMs) => retries.push(retryInMs) })),
    ).rejects.toBeInstanceOf(ModelNotFoundError);
    expect(values).toEqual([1, 2, 3]);
    // Two streaks of failures: told of each once, with the pause that follows the first failure (5 ms doubled).
    expect(retries).toEqual([10, 10]);
  });

  it('ends quietly at the deadline, and rejects with the reason on Ctrl-C', async () => {
    const { read, calls } = reads([1]);
    await expect(poll(read, () => undefined, options({ deadline: Date.now() + 60 }))).resolves.toBeUndefined();
    expect(calls()).toBeGreaterThan(0);

    const interrupt = new AbortController();
    const never = poll(
      () => new Promise<number>(() => undefined),
      () => undefined,
      options({ signal: interrupt.signal }),
    );
    setTimeout(() => interrupt.abort(new Error('interrupted')), 30);
    await expect(never).rejects.toThrow('interrupted');
  });
});
