// An update the server aborted before the workflow saw it (Unavailable: the workflow task that carried it timed out,
// say on the queue of a worker that was just lost) is sent again, with the same update ID, until it is accepted or
// the accept deadline passes. One the server rejected because the worker completed its task without seeing it
// (UnprocessedUpdate) is sent again as a new update. Anything else is not repeated.
import type { Client, WorkflowUpdateHandle } from '@temporalio/client';
import { ServiceError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { accepted } from '../../client/send-update.js';
import { WaitTimeoutError } from '../../client/errors.js';

const ref = { cluster: 'gpu', namespace: 'models', name: 'qwen' };
const client = { withAbortSignal: (_signal: AbortSignal, fn: () => Promise<unknown>) => fn() } as unknown as Client;
const aborted = () =>
  new ServiceError('Workflow Update failed', {
    cause: Object.assign(new Error('workflow update was aborted'), { code: 14 }),
  });
const rejection = (type: string) =>
  new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.create({ type, message: type }));

/** A handle as the SDK returns it: `result()` answers at once when the outcome came with the acceptance. */
function handle(updateId: string, result: () => Promise<unknown>): WorkflowUpdateHandle<unknown> {
  return { updateId, workflowId: 'w', result };
}
/** An update still running: `result()` would poll until its signal aborts. */
const running = (updateId: string) =>
  handle(updateId, () => new Promise((_resolve, reject) => setTimeout(() => reject(new Error('polled')), 60_000)));

describe('accepted', () => {
  it('sends an aborted update again, with the same ID, until it is accepted', async () => {
    const ids: string[] = [];
    const result = await accepted(client, ref, 'update', 10_000, async (updateId) => {
      ids.push(updateId);
      if (ids.length < 3) throw aborted();
      return handle(updateId, async () => 'done');
    });
    expect(result.updateId).toBe(ids[0]);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
  });

  it('sends an update the worker never saw again, as a new update, and returns the accepted one', async () => {
    const ids: string[] = [];
    const result = await accepted(client, ref, 'update', 10_000, async (updateId) => {
      ids.push(updateId);
      if (ids.length === 1) return handle(updateId, () => Promise.reject(rejection('UnprocessedUpdate')));
      return running(updateId);
    });
    expect(ids).toHaveLength(2);
    expect(ids[1]).not.toBe(ids[0]);
    expect(result.updateId).toBe(ids[1]);
  });

  it('gives up on updates the worker never sees when the accept deadline passes', async () => {
    let calls = 0;
    await expect(
      accepted(client, ref, 'update', 600, async (updateId) => {
        calls++;
        return handle(updateId, () => Promise.reject(rejection('UnprocessedUpdate')));
      }),
    ).rejects.toBeInstanceOf(WaitTimeoutError);
    expect(calls).toBeGreaterThanOrEqual(2);
  });

  it("returns a rejection by the workflow's validator as it is, for result() to report", async () => {
    let calls = 0;
    const refusal = handle('u', () => Promise.reject(rejection('InvalidSpec')));
    const result = await accepted(client, ref, 'update', 10_000, async () => {
      calls++;
      return refusal;
    });
    expect(result).toBe(refusal);
    expect(calls).toBe(1);
  });

  it('does not repeat any other failure', async () => {
    let calls = 0;
    const refused = new ServiceError('Workflow Update failed', { cause: Object.assign(new Error('no'), { code: 9 }) });
    await expect(
      accepted(client, ref, 'update', 10_000, async () => {
        calls++;
        throw refused;
      }),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);
  });
});
