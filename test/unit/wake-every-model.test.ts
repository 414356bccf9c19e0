// A worker without the watch wakes every running model of its cluster on a clock, only while it is the current
// version's, and goes on past a model that ended and a visibility list that failed.
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterEach, describe, expect, it } from 'vitest';
import { wakeEveryModel } from '../../worker/wake-every-model.js';
import { waitFor } from '../support/kube.js';

const stops: (() => void)[] = [];
afterEach(() => stops.splice(0).forEach((stop) => stop()));

/** A client whose visibility lists `ids` (or throws `listError` once), recording each signal. */
function fakeClient(ids: string[], options: { listError?: Error; gone?: string } = {}) {
  const queries: string[] = [];
  const signals: { workflowId: string; name: string; args: unknown[] }[] = [];
  let listError = options.listError;
  const client = {
    workflow: {
      list: ({ query }: { query: string }) => {
        queries.push(query);
        return (async function* () {
          if (listError) {
            const err = listError;
            listError = undefined;
            throw err;
          }
          for (const workflowId of ids) yield { workflowId };
        })();
      },
      getHandle: (workflowId: string) => ({
        signal: async (def: { name: string }, ...args: unknown[]) => {
          if (workflowId === options.gone) throw new WorkflowNotFoundError('gone', workflowId, undefined);
          signals.push({ workflowId, name: def.name, args });
        },
      }),
    },
  };
  return { client: client as unknown as Parameters<typeof wakeEveryModel>[1], queries, signals };
}

describe('wakeEveryModel (FERRY_WATCH=off)', () => {
  it("signals every running model of the cluster each interval, a look's worth, past one that ended", async () => {
    const { client, queries, signals } = fakeClient(
      ['servedmodel/c1/ns/a', 'servedmodel/c1/ns/gone', 'servedmodel/c1/ns/b'],
      {
        gone: 'servedmodel/c1/ns/gone',
      },
    );
    const warnings: string[] = [];
    stops.push(wakeEveryModel('c1', client, { warn: (m: string) => warnings.push(m) }, 40));
    await waitFor('two rounds', 5_000, async () => signals.length >= 4);
    expect(queries[0]).toBe("FerryCluster = 'c1' AND ExecutionStatus = 'Running'");
    expect(signals.slice(0, 4)).toEqual(
      ['a', 'b', 'a', 'b'].map((n) => ({
        workflowId: `servedmodel/c1/ns/${n}`,
        name: 'ferry.modelChanged',
        args: [{ objects: [] }],
      })),
    );
    expect(warnings).toEqual([]);
  });

  it('does nothing while this worker is not the current version, and tries again after a failed list', async () => {
    const { client, signals } = fakeClient(['servedmodel/c1/ns/a'], { listError: new Error('visibility away') });
    const warnings: string[] = [];
    let current = false;
    stops.push(wakeEveryModel('c1', client, { warn: (m: string) => warnings.push(m) }, 40, async () => current));
    await new Promise((r) => setTimeout(r, 200));
    expect(signals).toEqual([]);
    current = true;
    await waitFor('a wake after the failed round', 5_000, async () => signals.length >= 1);
    expect(warnings).toEqual(['cannot wake the models (FERRY_WATCH=off); trying again next interval']);
  });
});
