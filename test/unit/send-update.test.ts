// An update the server aborted before the workflow saw it (Unavailable: the workflow task that carried it timed out,
// say on the queue of a worker that was just lost) is sent again, with the same update ID, until it is accepted or
// the accept deadline passes; anything else is not repeated.
import type { Client, WorkflowUpdateHandle } from '@temporalio/client';
import { ServiceError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { accepted } from '../../client/send-update.js';

const ref = { cluster: 'gpu', namespace: 'models', name: 'qwen' };
const client = { withAbortSignal: (_signal: AbortSignal, fn: () => Promise<unknown>) => fn() } as unknown as Client;
const aborted = () =>
  new ServiceError('Workflow Update failed', {
    cause: Object.assign(new Error('workflow update was aborted'), { code: 14 }),
  });

describe('accepted', () => {
  it('sends an aborted update again until it is accepted', async () => {
    let calls = 0;
    const handle = { updateId: 'u' } as WorkflowUpdateHandle<unknown>;
    const result = await accepted(client, ref, 'update', 10_000, async () => {
      calls++;
      if (calls < 3) throw aborted();
      return handle;
    });
    expect(result).toBe(handle);
    expect(calls).toBe(3);
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
