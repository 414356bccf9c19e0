// The `ferry` CLI as a script uses it: spawned as `node bin/ferry.js`, against the local Temporal dev server and a
// Ferry worker (createWorker) with stub activities on a cluster of its own.
import { createServer as createHttp2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { WorkflowNotFoundError } from '@temporalio/client';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { deleteModel } from '../../../client/delete-model.js';
import { modelHandle } from '../../../client/model-status.js';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { eventually, runFerry, spawnFerry, writeDoc } from '../../support/ferry-worker.js';
import { startGrpcRelay } from '../../support/grpc-relay.js';
import { useFerryWorker } from '../../support/fixtures.js';
import { failure, reportProgress, StubActivities } from '../../support/stub-activities.js';

// Models named crash-* never become healthy: the engine crash-loops.
const stub = new StubActivities().failForModels('awaitHealth', 'crash-', () =>
  failure('CrashLoopBackOff', 'the engine exited with code 1: CUDA out of memory'),
);
const { harness, ferry } = useFerryWorker(stub);

const json = <T>(text: string): T => JSON.parse(text) as T;

describe('ferry CLI', () => {
  it('serve --wait, serve again, a conflicting serve, update --wait, list, status, delete --wait', async () => {
    const doc = ferry.doc();
    const name = doc.metadata.name as string;
    const file = writeDoc(doc);
    const ref = { cluster: ferry.cluster, namespace: 'models', name };

    // serve --wait: Ready, exit 0, JSON with the status; progress went to stderr.
    const served = await runFerry(['serve', '-f', file, '--wait', '--timeout', '1m', '-o', 'json']);
    expect(served.stderr).toMatch(/Ready +generation 1/);
    expect(served.code).toBe(0);
    const first = json<{ workflowId: string; runId: string; started: boolean; status: ModelStatus }>(served.stdout);
    expect(first).toMatchObject({
      workflowId: `servedmodel/${ferry.cluster}/models/${name}`,
      started: true,
      status: { phase: 'Ready', generation: 1, observedGeneration: 1, readyReplicas: 1 },
    });
    expect(first.status.endpoint).toBe(`http://${name}.models.svc:8000/v1`);

    // The same spec again: the same run, exit 0.
    const again = await runFerry(['serve', '-f', file, '-o', 'json']);
    expect(again.code).toBe(0);
    expect(json<{ runId: string; started: boolean }>(again.stdout)).toMatchObject({
      runId: first.runId,
      started: false,
    });

    // Another spec for the same name: refused, pointing to update; the running model is untouched.
    const conflicting = writeDoc(ferry.doc((d) => (d.spec.replicas = 2), name));
    const refused = await runFerry(['serve', '-f', conflicting]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /already served with a different spec \(it differs in spec\.replicas\).*ferry update -f/,
    );
    expect((await modelHandle(harness.client, ref).describe()).runId).toBe(first.runId);

    // update --wait: generation 2 reconciled, in place.
    const updated = await runFerry(['update', '-f', conflicting, '--wait', '-o', 'json']);
    expect(updated.code).toBe(0);
    expect(json(updated.stdout)).toMatchObject({
      generation: 2,
      changed: true,
      sourceChanged: false,
      changes: ['spec.replicas'],
      status: { phase: 'Ready', observedGeneration: 2, replicas: 2, readyReplicas: 2 },
    });

    // list -n models --phase Ready finds it (visibility lags the workflow a little).
    const listed = await eventually(
      () => runFerry(['list', '-n', 'models', '--phase', 'Ready', '--cluster', ferry.cluster, '-o', 'json']),
      (run) => run.code === 0 && json<{ name: string }[]>(run.stdout).some((m) => m.name === name),
    );
    expect(json<unknown[]>(listed.stdout)).toContainEqual(
      expect.objectContaining({ name, namespace: 'models', cluster: ferry.cluster, phase: 'Ready' }),
    );
    const table = await runFerry(['list', '-n', 'models', '--cluster', ferry.cluster]);
    expect(table.stdout).toMatch(
      new RegExp(`^NAME +CLUSTER +PHASE +READY +GEN +ENDPOINT +AGE\\n${name} +${ferry.cluster} +Ready +2/2 +2/2 `),
    );

    // status: found by name alone (its cluster comes from visibility), as JSON and as a summary.
    const status = await runFerry(['status', name, '-n', 'models', '-o', 'json']);
    expect(status.code).toBe(0);
    expect(json<ModelStatus>(status.stdout)).toMatchObject({
      name,
      cluster: ferry.cluster,
      phase: 'Ready',
      generation: 2,
    });
    // The same as YAML, and as kubectl's -o name; list's names are one a line.
    const yaml = await runFerry(['status', name, '-n', 'models', '-o', 'yaml']);
    expect(parseYaml(yaml.stdout)).toMatchObject({ name, cluster: ferry.cluster, phase: 'Ready', generation: 2 });
    expect((await runFerry(['status', name, '-n', 'models', '-o', 'name'])).stdout).toBe(`servedmodel/${name}\n`);
    const names = await runFerry(['list', '-n', 'models', '--cluster', ferry.cluster, '-o', 'name']);
    expect(names.stdout.split('\n')).toContain(`servedmodel/${name}`);
    const summary = await runFerry(['status', name, '-n', 'models', '--cluster', ferry.cluster]);
    expect(summary.stdout).toMatch(/^ {2}phase: +Ready$/m);
    expect(summary.stdout).toMatch(/^ {2}generation: +2 \(observed 2\)$/m);
    expect(summary.stdout).toMatch(/^ {4}STEP +GEN +OUTCOME +TOOK +STARTED +DETAIL$/m);
    // With the Web UI's address known, status links the model's workflow there.
    const linked = await runFerry(['status', name, '-n', 'models', '--cluster', ferry.cluster], {
      TEMPORAL_UI_URL: 'http://ui.example:8233/',
    });
    expect(linked.stdout).toContain(
      `  web UI:      http://ui.example:8233/namespaces/default/workflows/servedmodel%2F${ferry.cluster}%2Fmodels%2F${name}\n`,
    );
    expect(summary.stdout).not.toContain('web UI');

    // delete --wait: exit 0, everything torn down, the workflow completed; a second delete is a no-op.
    const deleted = await runFerry(['delete', name, '-n', 'models', '--cluster', ferry.cluster, '--wait']);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toMatch(new RegExp(`^deleted ${name} .*: deleted Deployment/${name}, Service/${name}`));
    expect((await modelHandle(harness.client, ref).describe()).status.name).toBe('COMPLETED');
    const twice = await runFerry(['delete', name, '-n', 'models', '--cluster', ferry.cluster, '--wait']);
    expect(twice.code).toBe(0);
    expect(twice.stdout).toMatch(/was already deleted/);
    const gone = await runFerry(['status', name, '-n', 'models', '--cluster', ferry.cluster, '-o', 'json']);
    expect(json<ModelStatus>(gone.stdout).phase).toBe('Deleted');
  }, 180_000);

  it('update and delete --cluster send their update first and once; the SDK goes on under its ID only to follow it', async () => {
    const doc = ferry.doc();
    const name = doc.metadata.name as string;
    const ref = { cluster: ferry.cluster, namespace: 'models', name };
    // A second model, for a delete without --wait.
    const other = ferry.doc();
    const otherName = other.metadata.name as string;
    const served = await Promise.all(
      [doc, other].map((d) => runFerry(['serve', '-f', writeDoc(d), '--wait', '--timeout', '1m'])),
    );
    expect(served.map((r) => r.code)).toEqual([0, 0]);
    // Every call of the processes below goes through a relay that writes it down.
    const relay = await startGrpcRelay();
    const env = { TEMPORAL_ADDRESS: relay.address };
    const since = (mark: number) => relay.calls.slice(mark);
    const updatesSince = (mark: number) => since(mark).filter((c) => c.method === 'UpdateWorkflowExecution');
    const replicas = (n: number) => writeDoc(ferry.doc((d) => (d.spec.replicas = n), name));
    try {
      // The update is the process's first call (client/early-update.ts), with the headers the SDK sends. Its answer
      // (accepted, with the result) is all `ferry update` prints: the SDK never loads and makes no call.
      let mark = relay.calls.length;
      const updated = await runFerry(['update', '-f', replicas(2), '-o', 'json'], env);
      expect(updated.code, updated.stderr).toBe(0);
      expect(json(updated.stdout)).toEqual({
        accepted: true,
        generation: 2,
        changed: true,
        sourceChanged: false,
        changes: ['spec.replicas'],
      });
      expect(since(mark)).toHaveLength(1);
      expect(relay.calls[mark]).toMatchObject({
        method: 'UpdateWorkflowExecution',
        headers: {
          'content-type': 'application/grpc',
          'temporal-namespace': 'default',
          'client-name': 'temporal-typescript',
        },
      });
      // The same words as when the SDK sends it (FERRY_CLI_EARLY=0), which it does on its one connection.
      mark = relay.calls.length;
      const early = await runFerry(['update', '-f', replicas(3)], env);
      expect(early.code, early.stderr).toBe(0);
      expect(early.stdout).toBe(`updated models/${name}: generation 3: spec.replicas changed\n`);
      mark = relay.calls.length;
      const bySdk = await runFerry(['update', '-f', replicas(4)], { ...env, FERRY_CLI_EARLY: '0' });
      expect(bySdk.code, bySdk.stderr).toBe(0);
      expect(bySdk.stdout).toBe(`updated models/${name}: generation 4: spec.replicas changed\n`);
      expect(updatesSince(mark)).toHaveLength(1);
      expect(new Set(since(mark).map((c) => c.connection)).size).toBe(1);

      // With --wait, the SDK takes the acceptance over and follows the model on its own connection, without sending
      // the update again.
      mark = relay.calls.length;
      const waited = await runFerry(['update', '-f', replicas(1), '--wait', '--timeout', '1m'], env);
      expect(waited.code, waited.stderr).toBe(0);
      expect(waited.stdout).toMatch(new RegExp(`^updated models/${name}: generation 5: spec.replicas changed\n`));
      // The update once; then, when the model is not Ready at that generation yet, the `awaitPhase` update the wait
      // sends (the history below holds each change once).
      expect(updatesSince(mark).length).toBeGreaterThanOrEqual(1);
      expect(updatesSince(mark).length).toBeLessThanOrEqual(2);
      const sdkCalls = since(mark + 1);
      expect(sdkCalls.map((c) => c.method)).toContain('PollWorkflowExecutionUpdate');
      expect(sdkCalls.every((c) => c.connection !== relay.calls[mark]!.connection)).toBe(true);

      // A rejection comes back in the SDK's words: it sends the update again under the same ID (a rejected update
      // leaves no trace, so the workflow's validator answers again), and nothing changed.
      mark = relay.calls.length;
      const rwx = writeDoc(ferry.doc((d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }), name));
      const rejected = await runFerry(['update', '-f', rwx], env);
      expect(rejected.code).toBe(2);
      expect(rejected.stderr).toMatch(
        /spec\.storage\.accessMode: cannot change from "ReadWriteOnce" to "ReadWriteMany"/,
      );
      const twice = updatesSince(mark);
      expect(twice).toHaveLength(2);

      // `ferry delete` prints once the workflow has taken the request: one call. With --wait it follows the teardown
      // through the SDK.
      mark = relay.calls.length;
      const deleting = await runFerry(
        ['delete', otherName, '-n', 'models', '--cluster', ferry.cluster, '-o', 'json'],
        env,
      );
      expect(deleting.code, deleting.stderr).toBe(0);
      expect(json(deleting.stdout)).toEqual({
        ref: { name: otherName, namespace: 'models', cluster: ferry.cluster },
        alreadyDeleted: false,
      });
      expect(since(mark).map((c) => c.method)).toEqual(['UpdateWorkflowExecution']);
      const otherRef = { ...ref, name: otherName };
      expect((await deleteModel(harness.client, otherRef, { wait: true, timeoutMs: 60_000 })).status?.phase).toBe(
        'Deleted',
      );
      mark = relay.calls.length;
      const deleted = await runFerry(['delete', name, '-n', 'models', '--cluster', ferry.cluster, '--wait'], env);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout).toMatch(new RegExp(`^deleted ${name} `));
      expect(relay.calls[mark]!.method).toBe('UpdateWorkflowExecution');
      expect(updatesSince(mark)).toHaveLength(1);
    } finally {
      await relay.close();
    }
    // The history holds the three changes that were accepted, each once (beside `serve --wait`'s own update).
    const { events } = await modelHandle(harness.client, ref).fetchHistory();
    const accepted = (events ?? []).flatMap(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name ?? [],
    );
    expect(accepted.filter((n) => n === 'update' || n === 'delete')).toEqual([
      'update',
      'update',
      'update',
      'update',
      'delete',
    ]);
  }, 120_000);

  it('list shows the default namespace without -n, NS with -n, every one with -A, deleted ones with --include-deleted', async () => {
    // One model in the default namespace and two in a namespace of this test's own, one of which is deleted.
    const ns = `ns-${ferry.cluster}`;
    const docs = [
      ferry.doc((d) => (d.metadata.namespace = 'default')),
      ferry.doc((d) => (d.metadata.namespace = ns)),
      ferry.doc((d) => (d.metadata.namespace = ns)),
    ];
    const [here, there, gone] = docs.map((d) => d.metadata.name as string);
    // A few seconds, or minutes and seconds on a slow machine.
    const AGE = '\\d+(s|m(\\d+s)?)';
    try {
      const served = await Promise.all(
        docs.map((d) => runFerry(['serve', '-f', writeDoc(d), '--wait', '--timeout', '1m'])),
      );
      expect(served.map((r) => r.code)).toEqual([0, 0, 0]);
      const deleted = await runFerry(['delete', gone!, '-n', ns, '--cluster', ferry.cluster, '--wait']);
      expect(deleted.code).toBe(0);

      type Row = { name: string; namespace: string; execution: string; phase: string };
      const rows = async (...args: string[]) => {
        const run = await runFerry(['list', '--cluster', ferry.cluster, ...args, '-o', 'json']);
        expect(run.code, args.join(' ')).toBe(0);
        return json<Row[]>(run.stdout);
      };
      const list = async (...args: string[]) => (await rows(...args)).map((m) => `${m.namespace}/${m.name}`).sort();
      // Visibility lags the workflows a little: wait until it has the deleted one closed and the other running.
      await eventually(
        () => list('-n', ns, '--include-deleted'),
        (names) => names.length === 2,
      );
      await eventually(
        () => list('-n', ns),
        (names) => names.length === 1,
      );

      // No flags: the default namespace only; -n NS: that namespace, running models only.
      expect(await list()).toEqual([`default/${here}`]);
      expect(await list('-n', ns)).toEqual([`${ns}/${there}`]);
      expect(await list('-n', ns, '--include-deleted')).toEqual([`${ns}/${gone}`, `${ns}/${there}`].sort());
      // -A: every namespace, running models only; -A wins over -n, as kubectl's does.
      const everywhere = await list('-A');
      expect(everywhere).toEqual(expect.arrayContaining([`default/${here}`, `${ns}/${there}`]));
      expect(everywhere).not.toContain(`${ns}/${gone}`);
      expect(await list('-A', '-n', ns)).toEqual(everywhere);
      // --include-deleted adds the deleted one, closed.
      expect(await rows('--all-namespaces', '--include-deleted')).toContainEqual(
        expect.objectContaining({ name: gone, namespace: ns, execution: 'COMPLETED', phase: 'Deleted' }),
      );

      // The table: no NAMESPACE column for one namespace; with -A a NAMESPACE column first. Ages as kubectl's (12s, 2m5s).
      const one = await runFerry(['list', '--cluster', ferry.cluster]);
      expect(one.stdout).toMatch(
        new RegExp(
          `^NAME +CLUSTER +PHASE +READY +GEN +ENDPOINT +AGE\\n${here} +${ferry.cluster} +Ready +1/1 +1/1 +\\S+ +${AGE}\\n$`,
        ),
      );
      const every = await runFerry(['list', '--cluster', ferry.cluster, '-A']);
      const lines = every.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^NAMESPACE +NAME +CLUSTER +PHASE +READY +GEN +ENDPOINT +AGE$/);
      const row = (namespace: string, name: string) =>
        new RegExp(`^${namespace} +${name} +${ferry.cluster} +Ready +1/1 +1/1 +\\S+ +${AGE}$`);
      expect(lines).toEqual(
        expect.arrayContaining([expect.stringMatching(row('default', here!)), expect.stringMatching(row(ns, there!))]),
      );
      const nothing = await runFerry(['list', '--cluster', ferry.cluster, '-n', 'no-models-here']);
      expect(nothing).toMatchObject({ code: 0, stdout: 'no models in namespace no-models-here\n' });

      // The old --all: exit 2, saying what it became.
      const old = await runFerry(['list', '--all']);
      expect(old.code).toBe(2);
      expect(old.stderr).toMatch(
        /^error: --all is now --include-deleted \(deleted models\); -A\/--all-namespaces lists every namespace\n/,
      );
    } finally {
      // The worker's cleanup terminates models of namespace models only: these are in others.
      for (const [name, namespace] of [
        [here!, 'default'],
        [there!, ns],
      ] as const) {
        await modelHandle(harness.client, { cluster: ferry.cluster, namespace, name })
          .terminate('test finished')
          .catch(() => undefined);
      }
    }
  }, 120_000);

  it('apply starts a model that is not served, then updates it in place, and refuses an immutable change', async () => {
    const doc = ferry.doc();
    const name = doc.metadata.name as string;
    const ref = { cluster: ferry.cluster, namespace: 'models', name };

    const created = await runFerry(['apply', '-f', writeDoc(doc), '--wait', '--timeout', '1m']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(
      new RegExp(`^serving ${name} \\(namespace models, cluster ${ferry.cluster}\\): started`),
    );
    expect(created.stdout).toMatch(/^ {2}phase: +Ready$/m);
    const runId = (await modelHandle(harness.client, ref).describe()).runId;

    const same = await runFerry(['apply', '-f', writeDoc(doc)]);
    expect(same).toMatchObject({ code: 0, stdout: `applied to models/${name}: generation 1: no change\n` });

    const bigger = writeDoc(ferry.doc((d) => (d.spec.replicas = 2), name));
    const updated = await runFerry(['apply', '-f', bigger, '--wait', '-o', 'json']);
    expect(updated.code).toBe(0);
    expect(json(updated.stdout)).toMatchObject({
      runId,
      started: false,
      generation: 2,
      changed: true,
      changes: ['spec.replicas'],
      status: { phase: 'Ready', observedGeneration: 2, readyReplicas: 2 },
    });

    const rwx = writeDoc(ferry.doc((d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }), name));
    const rejected = await runFerry(['apply', '-f', rwx]);
    expect(rejected.code).toBe(2);
    expect(rejected.stderr).toMatch(/spec\.storage\.accessMode: cannot change from "ReadWriteOnce" to "ReadWriteMany"/);
    expect((await modelHandle(harness.client, ref).describe()).runId).toBe(runId);
    await runFerry(['delete', name, '-n', 'models', '--cluster', ferry.cluster, '--wait']);
  }, 120_000);

  it('rejects an invalid spec with exit 2 and one line per field, and starts nothing', async () => {
    const doc = ferry.doc((d) => {
      d.spec.replicas = -1;
      d.spec.storage = { size: 'lots' };
    });
    const run = await runFerry(['serve', '-f', writeDoc(doc), '--wait']);
    expect(run.code).toBe(2);
    expect(run.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^error: invalid ServedModel in .*\.yaml \(2 problems\):$/),
      '  spec.storage.size: must be a positive quantity like 50Gi, got "lots"',
      '  spec.replicas: must be 0 or more',
    ]);
    const ref = { cluster: ferry.cluster, namespace: 'models', name: doc.metadata.name };
    await expect(modelHandle(harness.client, ref).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('exits 1 with the named reason when the model fails, and 3 for a model that does not exist', async () => {
    const doc = ferry.doc(undefined, `crash-${Date.now().toString(36)}`);
    const run = await runFerry(['serve', '-f', writeDoc(doc), '--wait']);
    expect(run.code).toBe(1);
    expect(run.stderr.trimEnd().split('\n').at(-1)).toBe(
      'error: CrashLoopBackOff: the engine exited with code 1: CUDA out of memory',
    );

    const unknown = await runFerry(['status', 'no-such-model', '-n', 'models', '--cluster', ferry.cluster]);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toBe(`error: no-such-model (namespace models, cluster ${ferry.cluster}): no such model\n`);
  });

  it('watch prints phase changes and download progress, and exits 0 once Ready', async () => {
    const gate = stub.gate('awaitPuller', () =>
      reportProgress({ step: 'download', state: 'Running', bytes: 512 * 2 ** 20, totalBytes: 2 ** 30 }),
    );
    const doc = ferry.doc();
    const served = await runFerry(['serve', '-f', writeDoc(doc)]);
    expect(served.code).toBe(0);
    expect(served.stdout).toMatch(/^serving .*: started workflow servedmodel\//);

    const watch = spawnFerry(['watch', doc.metadata.name, '-n', 'models', '--cluster', ferry.cluster]);
    await watch.waitForOutput(/Downloading +512\.0 MiB of 1\.0 GiB \(50%\), Running/);
    gate.release();
    const done = await watch.exited;
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/^watching .* \(Ctrl-C to stop\)$/m);
    expect(done.stdout).toMatch(/^\d\d:\d\d:\d\d {2}Ready +generation 1 +http:\/\//m);
  });

  it('exits 5 and names the namespace when Temporal has no such namespace', async () => {
    for (const args of [['list'], ['status', 'qwen', '-n', 'models']]) {
      const run = await runFerry([...args, '--temporal-namespace', 'no-such-namespace']);
      expect(run.code, args.join(' ')).toBe(5);
      expect(run.stderr).toMatch(
        /^error: Temporal at \S+ has no namespace "no-such-namespace"; check TEMPORAL_NAMESPACE/,
      );
    }
  });

  it('exits 5 and names the address when Temporal cannot be reached, at once when the connection is refused', async () => {
    const started = performance.now();
    const run = await runFerry(['list'], { TEMPORAL_ADDRESS: '127.0.0.1:9' });
    expect(run.code).toBe(5);
    expect(run.stderr).toMatch(/^error: cannot connect to Temporal at 127\.0\.0\.1:9: the connection failed: refused/);
    // Not gRPC's retries until the connection's deadline (2 s; it was 5 s, and every refusal took that long).
    expect(performance.now() - started).toBeLessThan(4_500);
  });

  it('exits 5, naming the address, when something that is not Temporal answers there', async () => {
    // An HTTP/2 server that answers every request 404, as a web server or a wrong port would.
    const server = createHttp2Server((_req, res) => {
      res.statusCode = 404;
      res.end('not found');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const args of [['list'], ['status', 'qwen', '-n', 'models'], ['delete', 'qwen', '-n', 'models']]) {
        const run = await runFerry(args, { TEMPORAL_ADDRESS: address });
        expect(run.code, args.join(' ')).toBe(5);
        expect(run.stderr).toMatch(
          new RegExp(
            `^error: cannot connect to Temporal at ${address}: .*; something answers there, but it is not Temporal's frontend`,
          ),
        );
      }
    } finally {
      server.close();
    }
  });
});
