// `ferry serve|update|apply --dry-run=server` as a script runs it (`node bin/ferry.js`, from dist/), against a real
// worker process (worker/main.ts, the real activities) and the local control plane: the worker checks the document,
// the API server dry-run applies every object, and nothing is created. And `dryRunModel`, the library function under it.
import { Client, Connection } from '@temporalio/client';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dryRunModel } from '../../../client/index.js';
import { hasWorker } from '../../../client/model-status.js';
import { taskQueueFor } from '../../../workflows/contract/index.js';
import { eventually, runFerry, writeDoc } from '../../support/ferry-worker.js';
import { modelObjects, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { readLocalEnv } from '../../support/local-env.js';
import type { Doc } from '../../support/workflow-harness.js';

const kube = useNamespace('cli-dry-run', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('dry');
let connection: Connection | undefined;
let client: Client;

beforeAll(async () => {
  await startWorkerProcess(cluster);
  connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  client = new Client({ connection });
  // A worker shows among the task queue's pollers a moment after it polls; until then a dry run says it has none.
  expect(await eventually(() => hasWorker(client, taskQueueFor(cluster)), Boolean)).toBe(true);
}, 180_000);

afterAll(async () => {
  await connection?.close();
});

const doc = (name: string, namespace = kube.ns, onCluster = cluster): Doc => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name, namespace },
  spec: { cluster: onCluster, source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } } },
});

interface Persisted {
  kind: string;
  metadata: { name: string; namespace: string; uid?: string; creationTimestamp?: string; managedFields?: unknown };
}

describe('ferry apply --dry-run=server', () => {
  it('prints every object as the API server would persist it, exits 0, and creates nothing', async () => {
    const file = writeDoc(doc('qwen'));
    const run = await runFerry(['apply', '-f', file, '--dry-run=server']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `^# ferry apply --dry-run=server: the worker of cluster ${cluster} and the Kubernetes API server checked ` +
          `${kube.ns}/qwen;\n# they accepted every object Ferry would create, .* Nothing was created\\.\n`,
      ),
    );
    const objects = parseAllDocuments(run.stdout).map((d) => d.toJSON() as Persisted);
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      'ConfigMap/qwen-ferry',
      'PersistentVolumeClaim/qwen-weights',
      expect.stringMatching(/^Job\/qwen-pull-[0-9a-f]{8}$/),
      'Deployment/qwen',
      'Service/qwen',
    ]);
    for (const o of objects) {
      // What only the API server gives an object, and none of its field managers' bookkeeping.
      expect(o.metadata).toMatchObject({ namespace: kube.ns, uid: expect.any(String) });
      expect(o.metadata.creationTimestamp).toEqual(expect.any(String));
      expect(o.metadata.managedFields).toBeUndefined();
    }

    // -o json: a List of the same objects; -o name: kind/name a line.
    const json = await runFerry(['serve', '-f', file, '--dry-run=server', '-o', 'json']);
    expect(json.code).toBe(0);
    const list = JSON.parse(json.stdout) as { kind: string; items: Persisted[] };
    expect(list.kind).toBe('List');
    expect(list.items.map((o) => o.kind)).toEqual(objects.map((o) => o.kind));
    const names = await runFerry(['update', '-f', file, '--dry-run=server', '-o', 'name']);
    expect(names.code).toBe(0);
    expect(names.stdout.split('\n')).toEqual(expect.arrayContaining(['configmap/qwen-ferry', 'service/qwen']));

    // Nothing in the namespace, and no model's workflow started.
    expect(await modelObjects(kube, kube.ns, 'qwen')).toEqual([]);
    const status = await runFerry(['status', 'qwen', '-n', kube.ns, '--cluster', cluster]);
    expect(status.code).toBe(3);
  });

  it('exits 2 naming each object the API server refuses: a namespace that does not exist', async () => {
    const absent = `${kube.ns}-absent`;
    const run = await runFerry(['serve', '-f', writeDoc(doc('qwen', absent)), '--dry-run=server']);
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toBe(
      `error: ConfigMap/qwen-ferry refused: applying ConfigMap ${absent}/qwen-ferry: namespaces "${absent}" not found`,
    );
    for (const line of lines) expect(line).toMatch(/^error: \w+\/qwen[-\w]* refused: .*namespaces ".*" not found$/);
    expect(run.stdout).toMatch(
      /\n# they refused every object Ferry would create \(on stderr\)\. Nothing was created\.\n$/,
    );
  });

  it('exits 2 naming the object whose name someone else holds, and prints the others', async () => {
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: { metadata: { name: 'taken-ferry' } } });
    const run = await runFerry(['apply', '-f', writeDoc(doc('taken')), '--dry-run=server']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      new RegExp(
        `^error: ConfigMap/taken-ferry refused: cannot serve model ${kube.ns}/taken: ConfigMap ${kube.ns}/taken-ferry already exists \\(.*without Ferry's labels\\)\\. Ferry never adopts`,
      ),
    );
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stdout).toMatch(
      /^# they refused 1 of 5 objects \(on stderr\); the others as the API server would persist them\./m,
    );
    const printed = parseAllDocuments(run.stdout).map((d) => (d.toJSON() as Persisted).kind);
    expect(printed).toEqual(['PersistentVolumeClaim', 'Job', 'Deployment', 'Service']);
  });

  it('exits 2 with the parser’s lines for a document it refuses, and sends nothing', async () => {
    const bad = doc('Qwen_2');
    (bad.spec as Record<string, unknown>).replicas = -1;
    const run = await runFerry(['serve', '-f', writeDoc(bad), '--dry-run=server']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error: invalid ServedModel in .*\.yaml \(2 problems\):\n {2}metadata\.name: /);
    expect(run.stderr).toMatch(/^ {2}spec\.replicas: /m);
    expect(run.stdout).toBe('');
  });

  it('says which task queue has no worker when the cluster has none, and exits 5', async () => {
    const nowhere = uniqueCluster('no-worker');
    const started = Date.now();
    const run = await runFerry(['serve', '-f', writeDoc(doc('qwen', kube.ns, nowhere)), '--dry-run=server']);
    expect(run.code).toBe(5);
    expect(run.stderr).toBe(
      `error: no Ferry worker polls task queue ferry-${nowhere}, so qwen (namespace ${kube.ns}, cluster ${nowhere}) ` +
        `cannot answer: start a worker with FERRY_CLUSTER=${nowhere}\n`,
    );
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('dryRunModel', () => {
  it('returns each object’s answer or refusal, and whether everything was accepted', async () => {
    const ok = await dryRunModel(client, doc('lib'));
    expect(ok).toMatchObject({ ref: { cluster, namespace: kube.ns, name: 'lib' }, accepted: true, issues: [] });
    expect(ok.objects.map((o) => o.kind)).toEqual([
      'ConfigMap',
      'PersistentVolumeClaim',
      'Job',
      'Deployment',
      'Service',
    ]);

    const refused = await dryRunModel(client, doc('lib', `${kube.ns}-absent`));
    expect(refused.accepted).toBe(false);
    expect(refused.objects.every((o) => o.object === undefined && /not found/.test(o.refusal ?? ''))).toBe(true);
    expect(await modelObjects(kube, kube.ns, 'lib')).toEqual([]);
  });
});
