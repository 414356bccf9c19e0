// Ferry as another team installs it: `npm pack`, installed into a throwaway project outside the repository, used
// from there with plain Node — the client library, the worker process, and a workflow of that team's own that
// imports the workflow-safe entry point and serves a model as a child on Ferry's worker.
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getModelStatus } from '../../../client/index.js';
import { modelObjects, uniqueCluster } from '../../support/e2e.js';
import { useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';
import type { Doc } from '../../support/workflow-harness.js';

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version: string }>;
};
const lockedVersion = (name: string) => lock.packages[`node_modules/${name}`]!.version;
const kube = useNamespace('pkg');
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('pkg');
const project = mkdtempSync(join(tmpdir(), 'ferry-consumer-'));
let tarball = '';
afterAll(() => rmSync(project, { recursive: true, force: true }));

beforeAll(async () => {
  // `npm pack` builds dist/ first (`prepare`), so the tarball holds what the sources compile to now.
  const packed = await run('npm', ['pack', '--silent', '--pack-destination', project], { cwd: repoRoot });
  tarball = join(project, packed.stdout.trim().split('\n').at(-1)!);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  cpSync(join(import.meta.dirname, 'consumer'), project, { recursive: true });
  // The peers at the versions the lock file tests, the worker's optional ones too: this project runs Ferry's worker.
  const peers = Object.keys(pkg.peerDependencies).map((name) => `${name}@${lockedVersion(name)}`);
  await run('npm', ['install', tarball, ...peers, '--no-audit', '--no-fund', '--prefer-offline'], {
    cwd: project,
    timeout: 300_000,
  });
  // Ferry's worker as the consumer runs it: the package's compiled `ferry-worker`, with the real activities.
  await startWorkerProcess(cluster, undefined, {
    args: [join(project, 'node_modules', '@ferry-dev', 'ferry', 'bin', 'ferry-worker.js')],
    cwd: project,
  });
}, 420_000);

function modelDoc(name: string): Doc {
  return {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name, namespace: kube.ns, labels: { 'sim.ferry.dev/load-delay-seconds': '0' } },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } },
      engine: { startupTimeout: '3m' },
    },
  };
}

/** Deleted objects finish going (the garbage collector takes the pods, then pvc-protection lets the volume go). */
const everythingGone = (name: string) =>
  waitFor(
    'every object of the model to be gone',
    60_000,
    async () => (await modelObjects(kube, kube.ns, name)).length === 0,
  );

/** Runs one of the consumer's programs with plain Node and the local stack's Temporal address; its JSON line. */
async function consumer<T>(script: string, doc: Doc): Promise<T> {
  const { stdout } = await run(process.execPath, [script, JSON.stringify(doc)], {
    cwd: project,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS },
    timeout: 300_000,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
}

it('packs compiled JavaScript with type declarations, and no TypeScript sources', async () => {
  const { stdout } = await run('tar', ['tzf', tarball]);
  const files = stdout.trim().split('\n');
  expect(files).toEqual(
    expect.arrayContaining([
      'package/bin/ferry.js',
      'package/bin/ferry-worker.js',
      'package/dist/client/index.js',
      'package/dist/client/index.d.ts',
      'package/dist/workflows/contract/index.js',
      'package/dist/worker/index.js',
    ]),
  );
  expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
  expect(files.filter((f) => /^package\/(test|deploy)\//.test(f))).toEqual([]);
  // Small: the library's compiled modules and their declarations, nothing that holds a dependency again. 1.07 MB with
  // the step modules and the spec's split (each module's declarations spell out the zod types it exports); 1.58 MB
  // with the rollout (spec.rollout's types in every declaration that spells out the spec, its steps and activities);
  // 1.75 MB with the sources of issue 30, the shared cache and the move between clusters.
  const { stdout: listing } = await run('tar', ['tvzf', tarball]);
  const unpacked = listing
    .trim()
    .split('\n')
    .map((line) => Number(line.trim().split(/\s+/)[2]))
    .reduce((a, b) => a + b, 0);
  expect(unpacked).toBeLessThan(1.9 * 1024 * 1024);
  expect(files.filter((f) => f.endsWith('.cjs'))).toEqual([]);
  expect(statSync(tarball).size).toBeLessThan(1.25 * 1024 * 1024);
});

it('exposes the client, the workflow-safe helpers and the worker as entry points, and the bins', async () => {
  const script = `
    const entries = {};
    for (const entry of ['@ferry-dev/ferry', '@ferry-dev/ferry/workflow', '@ferry-dev/ferry/worker']) {
      entries[entry] = Object.keys(await import(entry));
    }
    console.log(JSON.stringify(entries));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: project });
  const entries = JSON.parse(stdout) as Record<string, string[]>;
  expect(entries['@ferry-dev/ferry']).toEqual(
    expect.arrayContaining(['serveModel', 'applyModel', 'deleteModel', 'waitForPhase', 'createServingActivities']),
  );
  expect(entries['@ferry-dev/ferry/workflow']).toEqual(
    expect.arrayContaining(['withServedModel', 'serveAsChild', 'evaluateCheckpointWorkflow', 'ferryModelsService']),
  );
  expect(entries['@ferry-dev/ferry/worker']).toEqual(expect.arrayContaining(['createWorker', 'parseWorkerConfig']));
  const help = await run(process.execPath, [join(project, 'node_modules', '.bin', 'ferry'), '--help'], {
    cwd: project,
  });
  expect(help.stdout).toMatch(/^ferry: serve LLMs on Kubernetes/);
  // A command that talks to Temporal: its first run writes Node's compile cache into the user's cache directory.
  const cache = join(project, 'cache');
  const list = await run(process.execPath, [join(project, 'node_modules', '.bin', 'ferry'), 'list', '-n', kube.ns], {
    cwd: project,
    env: { PATH: process.env.PATH, XDG_CACHE_HOME: cache, TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS },
  });
  expect(list.stdout).toBe(`no models in namespace ${kube.ns}\n`);
  expect(readdirSync(join(cache, 'ferry', 'node'), { recursive: true }).length).toBeGreaterThan(0);
});

it('serves and deletes a model from plain Node with the installed client library', async () => {
  const name = `lib-${cluster.slice(-6)}`;
  const seen = await consumer<{
    ready: { phase: string; endpoint?: string };
    deleted: { phase: string; objects: string[] };
  }>('serve.mjs', modelDoc(name));
  expect(seen.ready.phase).toBe('Ready');
  expect(seen.ready.endpoint).toMatch(/^http:\/\//);
  expect(seen.deleted.phase).toBe('Deleted');
  expect(seen.deleted.objects).toEqual(expect.arrayContaining([`Deployment/${name}`, `Service/${name}`]));
  await everythingGone(name);
});

it("runs the team's own workflow, bundled from the workflow-safe entry point, against Ferry's worker", async () => {
  const name = `wf-${cluster.slice(-6)}`;
  const out = await consumer<{
    result: { phase: string; endpoint?: string };
    bundle: { kubernetesClient: boolean; ferryActivities: boolean; zod: boolean };
  }>('run-workflow.mjs', modelDoc(name));
  expect(out.bundle).toMatchObject({ kubernetesClient: false, ferryActivities: false, zod: true });
  expect(out.result.phase).toBe('Ready');
  expect(out.result.endpoint).toMatch(/^http:\/\//);
  // The child's teardown completed before the parent did: nothing of the model is left.
  await everythingGone(name);
});

it('tears the model down when the evaluating parent is terminated: its objects go from all to none', async () => {
  const name = `eval-${cluster.slice(-6)}`;
  const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  const client = new Client({ connection });
  const program = spawn(process.execPath, ['run-evaluation.mjs', JSON.stringify(modelDoc(name))], {
    cwd: project,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Record<string, string>[] = [];
  // The program's own lines are JSON; the SDK's core may log other lines to the same stream.
  createInterface({ input: program.stdout }).on('line', (line) => {
    if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, string>);
  });
  const exited = new Promise<number | null>((resolve) => program.on('exit', resolve));
  try {
    const parentId = await waitFor(
      'the evaluation to start',
      120_000,
      async () => lines.find((l) => l.started)?.started,
    );
    const ref = { cluster, namespace: kube.ns, name };
    await waitFor('the model to be Ready', 120_000, async () => {
      const status = await getModelStatus(client, ref).catch(() => undefined);
      return status?.phase === 'Ready';
    });
    const whileEvaluating = await modelObjects(kube, kube.ns, name);
    expect(whileEvaluating).toEqual(
      expect.arrayContaining([
        `ConfigMap/${name}-ferry`,
        `Deployment/${name}`,
        `PersistentVolumeClaim/${name}-weights`,
        `Service/${name}`,
      ]),
    );
    // No finally of the parent runs: only the child's parent-close policy (REQUEST_CANCEL) can clean up now.
    await client.workflow.getHandle(parentId).terminate('the parent is gone');
    expect(await exited).toBe(0);
    expect(lines.at(-1)).toEqual({ ended: 'TerminatedFailure' });
    await everythingGone(name);
    const model = client.workflow.getHandle(`servedmodel/${cluster}/${kube.ns}/${name}`);
    // The objects go a moment before the model's workflow records its end.
    const closed = await waitFor('the model workflow to close', 30_000, async () => {
      const state = (await model.describe()).status.name;
      return state === 'RUNNING' ? undefined : state;
    });
    expect(closed).toBe('CANCELLED');
    console.log(`objects of ${name}: ${whileEvaluating.length} while evaluating, 0 after the parent was terminated`);
  } finally {
    program.kill();
    await connection.close();
  }
});
