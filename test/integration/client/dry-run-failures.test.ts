// dryRunModel when the worker gives no answer: its activity fails (the API server unreachable from it), or it does not
// finish within the dry run's timeout. A Ferry worker (createWorker) with stub activities on a cluster of its own.
import { beforeAll, describe, expect, it } from 'vitest';
import { dryRunModel, FerryClientError } from '../../../client/index.js';
import { hasWorker } from '../../../client/model-status.js';
import { taskQueueFor } from '../../../workflows/contract/index.js';
import { eventually } from '../../support/ferry-worker.js';
import { useFerryWorker } from '../../support/fixtures.js';
import { blockUntilCancelled, failure, StubActivities, transient } from '../../support/stub-activities.js';

const stub = new StubActivities();
const { harness, ferry } = useFerryWorker(stub);

// A worker shows among the task queue's pollers a moment after it starts; until then a dry run says it has none.
beforeAll(async () => {
  expect(await eventually(() => hasWorker(harness.client, taskQueueFor(ferry.cluster)), Boolean)).toBe(true);
});

describe('dryRunModel without an answer', () => {
  it('passes on the activity’s own failure, type and message, after its retry', async () => {
    const doc = ferry.doc();
    stub.once('dryRunModel', () => Promise.reject(transient('KubernetesUnreachable', 'connect ECONNREFUSED')));
    stub.once('dryRunModel', () =>
      Promise.reject(failure('KubernetesUnreachable', 'reading ConfigMap models/x: connect ECONNREFUSED')),
    );
    const refused = dryRunModel(harness.client, doc);
    await expect(refused).rejects.toBeInstanceOf(FerryClientError);
    await expect(refused).rejects.toThrow(
      new RegExp(
        `^the worker of cluster ${ferry.cluster} could not dry-run ${doc.metadata.name} \\(namespace models, ` +
          `cluster ${ferry.cluster}\\): KubernetesUnreachable: reading ConfigMap models/x: connect ECONNREFUSED$`,
      ),
    );
    expect(stub.callsOf('dryRunModel').filter((c) => JSON.stringify(c.input).includes(doc.metadata.name))).toHaveLength(
      2,
    );
  });

  it('says the worker did not answer in time, and what to look at, when the dry run times out', async () => {
    const doc = ferry.doc();
    stub.once('dryRunModel', () => blockUntilCancelled());
    const started = Date.now();
    await expect(dryRunModel(harness.client, doc, { timeoutMs: 2_000 })).rejects.toThrow(
      `the worker of cluster ${ferry.cluster} (task queue ferry-${ferry.cluster}) did not answer the dry run of ` +
        `${doc.metadata.name} (namespace models, cluster ${ferry.cluster}) within 2s: is it busy, or a Ferry older ` +
        'than this client, without dry runs? Its log says which',
    );
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
