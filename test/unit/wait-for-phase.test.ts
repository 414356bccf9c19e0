// waitForPhase when the status cannot be read for a while (a worker or Temporal restarting): it keeps waiting,
// reads again with a backoff (not in a tight loop), says so once, and at the deadline names what it last saw.
import { ServiceError, type Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { WaitTimeoutError } from '../../client/errors.js';
import { waitForPhase } from '../../client/wait-for-phase.js';

/** A client whose every status read fails the way the server fails a query while a worker restarts. */
function unreadableClient(): { client: Client; reads: () => number } {
  let reads = 0;
  const handle = {
    describe: async () => {
      reads++;
      throw new ServiceError('Failed to query Workflow');
    },
    executeUpdate: async () => {
      throw new Error('not reached: no status, no update');
    },
  };
  const client = {
    workflow: { getHandle: () => handle },
    withAbortSignal: <T>(_signal: AbortSignal, fn: () => Promise<T>) => fn(),
  } as unknown as Client;
  return { client, reads: () => reads };
}

describe('waitForPhase with a status that cannot be read', () => {
  it('reads again with a backoff, warns once, and times out naming the last failure', async () => {
    const { client, reads } = unreadableClient();
    const warnings: string[] = [];
    const started = Date.now();
    const err = await waitForPhase(client, { cluster: 'c', namespace: 'n', name: 'm' }, ['Ready'], {
      timeoutMs: 1_500,
      pollIntervalMs: 1_000,
      onRetry: (e) => warnings.push(e.message),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect((err as Error).message).toMatch(/the status could not be read lately: Failed to query Workflow/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    expect(warnings).toEqual(['Failed to query Workflow']);
    // 0, 250, 750 and 1,500 ms: a handful of reads, not a busy loop.
    expect(reads()).toBeGreaterThanOrEqual(2);
    expect(reads()).toBeLessThanOrEqual(6);
  });
});
