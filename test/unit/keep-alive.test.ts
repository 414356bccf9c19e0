// The worker's keep-alive heartbeat: a running activity says it is alive every few seconds, repeating the details it
// last reported (a retried download resumes from them), and one that ends sooner sends nothing (heartbeats are billed).
import { Context } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { keepAlive, ProgressReporter } from '../../activities/cluster/progress.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function heartbeatsOf(env: MockActivityEnvironment): unknown[] {
  const beats: unknown[] = [];
  env.on('heartbeat', (details: unknown) => beats.push(details));
  return beats;
}

describe('keepAlive', () => {
  it('repeats the last reported details while the activity runs, and stops with it', async () => {
    const env = new MockActivityEnvironment();
    const beats = heartbeatsOf(env);
    await env.run(async () => {
      const stop = keepAlive(Context.current(), 20);
      const progress = { step: 'download' as const, state: 'Running', bytes: 42 };
      await new ProgressReporter(undefined).report(progress);
      await sleep(120);
      stop();
    });
    const after = beats.length;
    expect(after).toBeGreaterThanOrEqual(3);
    // The first is the report's own heartbeat; the rest are the keep-alive's, with the same details.
    expect(beats.slice(1)).toEqual(Array(after - 1).fill({ step: 'download', state: 'Running', bytes: 42 }));
    await sleep(60);
    expect(beats).toHaveLength(after);
  });

  it("repeats the previous attempt's details before the first report of a retry", async () => {
    const previous = { step: 'download', state: 'Running', bytes: 7 };
    const env = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: previous });
    const beats = heartbeatsOf(env);
    await env.run(async () => {
      const stop = keepAlive(Context.current(), 20);
      await sleep(70);
      stop();
    });
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats).toEqual(Array(beats.length).fill(previous));
  });

  it('sends nothing for an activity that ends before the first beat', async () => {
    const env = new MockActivityEnvironment();
    const beats = heartbeatsOf(env);
    await env.run(async () => {
      const stop = keepAlive(Context.current(), 200);
      await sleep(20);
      stop();
    });
    await sleep(250);
    expect(beats).toEqual([]);
  });
});
