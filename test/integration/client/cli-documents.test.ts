// `ferry` with several documents (-f given twice, YAML streams, -n), `delete -f`, `diff` and `--request-timeout`,
// spawned as a script runs it, against the local Temporal dev server and a Ferry worker with stub activities.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { modelHandle } from '../../../client/model-status.js';
import { taskQueueFor } from '../../../workflows/contract/identity.js';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { useFerryWorker } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
import type { Doc } from '../../support/workflow-harness.js';

const { harness, ferry } = useFerryWorker(new StubActivities());

const json = <T>(text: string): T => JSON.parse(text) as T;

/** The documents as one YAML stream in a file (the first written with `writeDoc`'s name, the rest after `---`). */
function writeStream(docs: Doc[]): string {
  const file = writeDoc(docs[0]!);
  writeFileSync(file, docs.map((d) => stringify(d)).join('---\n'));
  return file;
}

/** A document without a namespace, for -n to fill in. */
const withoutNamespace = (doc: Doc): Doc => ({ ...doc, metadata: { name: doc.metadata.name } });

describe('ferry with several documents', () => {
  it('apply, update, diff and delete -f act on every document of a stream; a bad one stops all before anything is sent', async () => {
    const [a, b] = [ferry.doc(), ferry.doc()].map(withoutNamespace) as [Doc, Doc];
    const names = [a.metadata.name as string, b.metadata.name as string];
    const refs = names.map((name) => ({ cluster: ferry.cluster, namespace: 'team', name }));
    const stream = writeStream([a, b]);

    // A bad document among good ones: exit 2, each problem named, nothing started.
    const bad = writeDoc(withoutNamespace(ferry.doc((d) => (d.spec.replicas = -1))));
    const refused = await runFerry(['apply', '-f', stream, '-f', bad, '-n', 'team']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^error: invalid ServedModel in \S+ \(1 problem\):\n {2}spec\.replicas: /);
    expect(refused.stdout).toBe('');
    await expect(modelHandle(harness.client, refs[0]!).describe()).rejects.toThrow(/not found/i);

    // diff before anything is served: everything is new, exit 1.
    const fresh = await runFerry(['diff', '-f', stream, '-n', 'team']);
    expect(fresh.code).toBe(1);
    expect(fresh.stdout).toContain(`--- /dev/null\n+++ ServedModel team/${names[0]} (${stream} (document 1))\n`);
    expect(fresh.stdout).toContain(`+++ Deployment team/${names[1]} (${stream} (document 2))\n`);

    // apply with -n: both started in order in namespace team, one line each.
    const applied = await runFerry(['apply', '-f', stream, '-n', 'team', '--wait', '--timeout', '1m']);
    expect(applied.stderr).not.toMatch(/error/);
    expect(applied.code).toBe(0);
    expect(applied.stdout.split('\n').filter((l) => l.startsWith('serving '))).toEqual(
      names.map((name) =>
        expect.stringMatching(new RegExp(`^serving ${name} \\(namespace team, cluster ${ferry.cluster}\\)`)),
      ),
    );
    for (const ref of refs) expect((await modelHandle(harness.client, ref).describe()).status.name).toBe('RUNNING');

    // diff now: nothing to change, exit 0; a document naming another namespace than -n: exit 2, both named.
    const same = await runFerry(['diff', '-f', stream, '-n', 'team']);
    expect(same).toMatchObject({ code: 0, stdout: '' });
    const elsewhere = await runFerry(['diff', '-f', writeDoc(ferry.doc()), '-n', 'team']);
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toMatch(
      /the namespace of the document, "models", does not match the namespace given with -n, "team"/,
    );

    // One model changed: diff shows the running spec against the new one and the Deployment, exit 1.
    const changed = writeStream([{ ...a, spec: { ...a.spec, replicas: 2 } }, b]);
    const diff = await runFerry(['diff', '-f', changed, '-n', 'team']);
    expect(diff.code).toBe(1);
    expect(diff.stdout).toContain(`--- ServedModel team/${names[0]} (running)\n`);
    expect(diff.stdout).toMatch(/^- {2}replicas: 1\n\+ {2}replicas: 2$/m);
    expect(diff.stdout).toContain(`--- Deployment team/${names[0]} (running)\n`);
    expect(diff.stdout).not.toContain(names[1]);

    // update -o json: an array, one result per document, in order.
    const updated = await runFerry(['update', '-f', changed, '-n', 'team', '-o', 'json']);
    expect(updated.code).toBe(0);
    expect(json<unknown[]>(updated.stdout)).toEqual([
      expect.objectContaining({ generation: 2, changed: true, changes: ['spec.replicas'] }),
      expect.objectContaining({ generation: 1, changed: false }),
    ]);

    // delete -f --wait: both gone; -o json is an array.
    const deleted = await runFerry(['delete', '-f', changed, '-n', 'team', '--wait', '-o', 'json']);
    expect(deleted.code).toBe(0);
    const results = json<{ ref: { name: string }; status: ModelStatus }[]>(deleted.stdout);
    expect(results.map((r) => [r.ref.name, r.status.phase])).toEqual(names.map((name) => [name, 'Deleted']));
    for (const ref of refs) expect((await modelHandle(harness.client, ref).describe()).status.name).toBe('COMPLETED');
  });

  it('keeps going past a model that fails, and exits with the worst code', async () => {
    const served = ferry.doc();
    const missing = ferry.doc();
    await runFerry(['serve', '-f', writeDoc(served)]);
    const stream = writeStream([missing, served]);
    // update: the first is not running (exit 3), the second is updated all the same.
    const run = await runFerry(['update', '-f', stream]);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(new RegExp(`^error: ${missing.metadata.name as string} .*: not running`));
    expect(run.stdout).toMatch(
      new RegExp(`^updated models/${served.metadata.name as string}: generation 1: no change$`, 'm'),
    );
    const gone = await runFerry(['delete', '-f', stream, '--wait']);
    expect(gone.code).toBe(3);
    expect(gone.stdout).toMatch(new RegExp(`^deleted ${served.metadata.name as string} `));
  });
});

describe('--request-timeout', () => {
  it('ends a request that takes longer with exit 4, naming it', async () => {
    // A worker that took the model's first workflow task and never answers: the status query waits for that task, as
    // it would behind a worker too busy to answer. (With no worker at all the server gives up on the query by itself
    // a second before its deadline, which leaves nothing of a 1 s bound to run out.)
    const cluster = `stalled-${randomBytes(3).toString('hex')}`;
    const doc = ferry.doc((d) => (d.spec.cluster = cluster));
    const name = doc.metadata.name as string;
    expect((await runFerry(['serve', '-f', writeDoc(doc)])).code).toBe(0);
    try {
      const task = await harness.client.withDeadline(Date.now() + 30_000, () =>
        harness.client.workflowService.pollWorkflowTaskQueue({
          namespace: harness.client.options.namespace,
          taskQueue: { name: taskQueueFor(cluster), kind: 1 },
          identity: 'a worker that never answers',
        }),
      );
      expect(task.workflowExecution?.workflowId).toContain(name);
      const started = performance.now();
      const run = await runFerry(['status', name, '-n', 'models', '--cluster', cluster, '--request-timeout', '1s']);
      expect(run.stderr).toMatch(
        /^error: Temporal at \S+ did not answer the QueryWorkflow request within 1\.0s \(--request-timeout\)/,
      );
      expect(run.code).toBe(4);
      // Not the status query's own 10 s.
      expect(performance.now() - started).toBeLessThan(8_000);
    } finally {
      await modelHandle(harness.client, { cluster, namespace: 'models', name }).terminate('test cleanup');
    }
  });

  it('bounds connecting to a server that never answers', async () => {
    const sockets: Socket[] = [];
    const server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const run = await runFerry(['list', '--request-timeout', '1s'], { TEMPORAL_ADDRESS: address });
      expect(run.stderr).toMatch(
        new RegExp(`^error: Temporal at ${address} did not answer the connect request within 1\\.0s`),
      );
      expect(run.code).toBe(4);
    } finally {
      for (const socket of sockets) socket.destroy();
      server.close();
    }
  });
});
