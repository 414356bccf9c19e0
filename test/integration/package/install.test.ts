// How the package installs for the two kinds of project that use it, from `npm pack`, outside the repository:
//  - a project that only calls Ferry (its client, its CLI): the Temporal SDK's client packages come as peers, and
//    nothing of the worker (Temporal's native core, the Kubernetes client) is installed or needed;
//  - a project on the oldest Temporal SDK the peer range names: one copy of each @temporalio/* package, its own
//    version, and a model served and deleted through the package's worker and client on it.
// package.test.ts covers the rest on the version the lock file pins.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueCluster } from '../../support/e2e.js';
import { useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>;
};
const temporalPeers = Object.keys(pkg.peerDependencies).filter((name) => name.startsWith('@temporalio/'));
/** The floor of the SDK's peer range (`^1.23.0` → 1.23.0): the oldest version Ferry says it supports. */
const OLDEST_SDK = pkg.peerDependencies['@temporalio/client']!.replace(/^\^/, '');

const scratch = mkdtempSync(join(tmpdir(), 'ferry-install-'));
let tarball = '';
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeAll(async () => {
  const packed = await run('npm', ['pack', '--silent', '--pack-destination', scratch], { cwd: repoRoot });
  tarball = join(scratch, packed.stdout.trim().split('\n').at(-1)!);
}, 300_000);

async function project(name: string, ...packages: string[]): Promise<string> {
  const dir = join(scratch, name);
  await run('mkdir', ['-p', dir]);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  await run('npm', ['install', tarball, ...packages, '--no-audit', '--no-fund', '--prefer-offline'], {
    cwd: dir,
    timeout: 300_000,
  });
  return dir;
}

/** The version of every installed copy of `name` in `dir`'s tree (one folder each; `npm ls --parseable`). */
async function copiesOf(dir: string, name: string): Promise<string[]> {
  const { stdout } = await run('npm', ['ls', name, '--all', '--parseable'], { cwd: dir });
  const folders = new Set(stdout.split('\n').filter((line) => line.endsWith(`/node_modules/${name}`)));
  return [...folders].map(
    (folder) => (JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { version: string }).version,
  );
}

const env = () => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS,
});

describe('a project that only calls Ferry', () => {
  const kube = useNamespace('pkgc');
  let dir = '';
  beforeAll(async () => {
    dir = await project('client-only');
  }, 420_000);

  it("installs the SDK's client packages as peers, and nothing of the worker", () => {
    for (const name of ['@temporalio/client', '@temporalio/common', '@temporalio/workflow']) {
      expect(existsSync(join(dir, 'node_modules', name, 'package.json')), name).toBe(true);
    }
    for (const name of ['@temporalio/core-bridge', '@temporalio/worker', '@kubernetes/client-node']) {
      expect(existsSync(join(dir, 'node_modules', name)), name).toBe(false);
    }
  });

  it('runs the client library and the CLI', async () => {
    const script = `const { listModels, connectFromEnv } = await import('@ferry-dev/ferry');
      const client = await connectFromEnv();
      console.log(JSON.stringify(await listModels(client, { namespace: ${JSON.stringify(kube.ns)} })));
      await client.connection.close();`;
    const lib = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, env: env() });
    expect(JSON.parse(lib.stdout)).toEqual([]);
    const cli = await run(process.execPath, [join(dir, 'node_modules/.bin/ferry'), 'list', '-n', kube.ns], {
      cwd: dir,
      env: env(),
    });
    expect(cli.stdout).toBe(`no models in namespace ${kube.ns}\n`);
  });

  it('says what to install when it is asked to run the worker', async () => {
    const failed = await run(process.execPath, [join(dir, 'node_modules/.bin/ferry-worker')], {
      cwd: dir,
      env: env(),
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toMatch(
      /^error: the worker needs @(temporalio\/worker|kubernetes\/client-node), which is not installed/,
    );
    expect(failed?.stderr).toContain(`'@temporalio/worker@${pkg.peerDependencies['@temporalio/worker']}'`);
  });
});

describe(`a project on the oldest supported Temporal SDK (${OLDEST_SDK})`, () => {
  const kube = useNamespace('pkgo');
  const startWorkerProcess = useWorkerProcesses();
  const cluster = uniqueCluster('pkgo');
  let dir = '';
  beforeAll(async () => {
    dir = await project(
      'oldest-sdk',
      ...temporalPeers.map((name) => `${name}@${OLDEST_SDK}`),
      `@kubernetes/client-node@${pkg.peerDependencies['@kubernetes/client-node']}`,
    );
    await startWorkerProcess(cluster, undefined, {
      args: [join(dir, 'node_modules', '@ferry-dev', 'ferry', 'bin', 'ferry-worker.js')],
      cwd: dir,
    });
  }, 600_000);

  it('has one copy of each @temporalio/* package, at that version', async () => {
    for (const name of [...temporalPeers, '@temporalio/core-bridge']) {
      expect(await copiesOf(dir, name), name).toEqual([OLDEST_SDK]);
    }
  });

  it('serves and deletes a model through its client and worker', async () => {
    const name = `old-${cluster.slice(-6)}`;
    const doc = {
      apiVersion: 'ferry.dev/v1alpha1',
      kind: 'ServedModel',
      metadata: { name, namespace: kube.ns, labels: { 'sim.ferry.dev/load-delay-seconds': '0' } },
      spec: {
        cluster,
        source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } },
        engine: { startupTimeout: '3m' },
      },
    };
    await run('cp', [join(import.meta.dirname, 'consumer', 'serve.mjs'), dir]);
    const { stdout } = await run(process.execPath, ['serve.mjs', JSON.stringify(doc)], {
      cwd: dir,
      env: env(),
      timeout: 300_000,
    });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      ready: { phase: string };
      deleted: { phase: string; objects: string[] };
    };
    expect(seen.ready.phase).toBe('Ready');
    expect(seen.deleted.phase).toBe('Deleted');
    expect(seen.deleted.objects).toEqual(expect.arrayContaining([`Deployment/${name}`]));
  }, 360_000);
});
