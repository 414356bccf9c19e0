// The worker image without a container engine: deploy/worker/Dockerfile's instructions replayed in a directory that
// stands for the image's root (COPY copies from the repository, RUN runs with the ENV set so far, USER switches uid
// and gid, ENTRYPOINT starts). What differs from a real build: FROM is this machine's Node.js (the same version: checked below) and Debian, not the
// base image, and the root filesystem is not read-only. What it proves: production dependencies alone run the
// worker, the bundle built at image build time is the one loaded, and uid 2000 can read everything it needs.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { expectPollingWorker, type ChildOutput } from '../../support/child-output.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';

interface Image {
  workdir: string;
  env: Record<string, string>;
  user?: { uid: number; gid: number };
  entrypoint: string[];
}

const root = mkdtempSync(join(tmpdir(), 'ferry-image-'));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A path inside the image, in the replay directory. */
const inImage = (path: string) => join(root, path);
/** An environment value naming image paths, with those paths moved into the replay directory. */
const rebase = (value: string, workdir: string) => value.replaceAll(workdir, inImage(workdir));

// npm's download cache outside the image, as the Dockerfile's cache mount keeps it; kept between runs.
const npmCache = join(process.env.FERRY_CACHE ?? join(process.env.HOME ?? tmpdir(), '.cache', 'ferry'), 'npm-image');

const npmSettings = () =>
  Object.fromEntries(
    Object.entries(process.env).filter(([key]) =>
      /^npm_config_(globalconfig|registry|cafile)$|^NODE_EXTRA_CA_CERTS$/.test(key),
    ),
  );

function replay(dockerfile: string): Image {
  const image: Image = { workdir: '/', env: {}, entrypoint: [] };
  const lines = readFileSync(dockerfile, 'utf8').split('\n');
  expect(
    lines.some((l) => l.trimEnd().endsWith('\\')),
    'line continuations are not replayed',
  ).toBe(false);
  for (const line of lines.map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))) {
    const [instruction, ...words] = line.split(/\s+/);
    const rest = line.slice(instruction!.length).trim();
    switch (instruction) {
      case 'FROM':
        // The base's Node.js is the one CI runs (test/unit/node-version.test.ts); the replay runs on that major too.
        expect(process.versions.node.split('.')[0]).toBe(/^node:(\d+)\./.exec(rest)?.[1]);
        break;
      case 'WORKDIR':
        image.workdir = rest;
        mkdirSync(inImage(rest), { recursive: true });
        break;
      case 'COPY': {
        const dest = words.at(-1)!;
        for (const src of words.slice(0, -1)) {
          // As Docker's COPY: into a folder (`./`), a file keeps its own name and a folder gives its contents.
          const target =
            dest.endsWith('/') && statSync(join(repoRoot, src)).isFile() ? join(dest, basename(src)) : dest;
          cpSync(join(repoRoot, src), inImage(join(image.workdir, target)), { recursive: true });
        }
        break;
      }
      case 'RUN': {
        const command = rest.replace(/^(--mount=\S+\s+)+/, '');
        execFileSync('sh', ['-c', command], {
          cwd: inImage(image.workdir),
          // The builder's npm settings (a registry mirror, a CA file), as a build on that machine would use them.
          env: { PATH: process.env.PATH, HOME: root, ...npmSettings(), npm_config_cache: npmCache, ...image.env },
          stdio: 'pipe',
          timeout: 300_000,
        });
        break;
      }
      case 'ENV':
        for (const pair of words) {
          const [key, value] = pair.split('=') as [string, string];
          image.env[key] = rebase(value, image.workdir);
        }
        break;
      case 'USER': {
        const [uid, gid] = rest.split(':').map(Number) as [number, number];
        image.user = { uid, gid };
        break;
      }
      case 'ENTRYPOINT':
        image.entrypoint = JSON.parse(rest) as string[];
        break;
      default:
        throw new Error(`the replay does not know Dockerfile instruction ${instruction}`);
    }
  }
  return image;
}

it('the Dockerfile yields a worker that runs as uid 2000 on production dependencies and its prebuilt bundle', async () => {
  const image = replay(join(repoRoot, 'deploy/worker/Dockerfile'));
  expect(image.user).toEqual({ uid: 2000, gid: 0 });
  expect(() => readFileSync(inImage('/app/node_modules/vitest/package.json'))).toThrow(/ENOENT/);
  expect(readFileSync(image.env.FERRY_WORKFLOW_BUNDLE!, 'utf8')).toContain('ServeModelWorkflow');

  // Root can become the image's user; anyone else runs it as themselves (the uid check below says which).
  const asImageUser = process.getuid?.() === 0;
  const [command, ...args] = asImageUser
    ? ['setpriv', `--reuid=${image.user!.uid}`, `--regid=${image.user!.gid}`, '--clear-groups', ...image.entrypoint]
    : image.entrypoint;
  const env = readLocalEnv();
  const cluster = `img-${randomBytes(4).toString('hex')}`;
  const home = mkdtempSync(join(tmpdir(), 'ferry-image-home-'));
  chmodSync(home, 0o777);
  const child = spawn(command!, args, {
    cwd: inImage(image.workdir),
    env: {
      PATH: process.env.PATH,
      HOME: home,
      ...image.env,
      TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
      FERRY_CLUSTER: cluster,
      FERRY_SHUTDOWN_GRACE: '2s',
      // Outside a pod and without a kubeconfig: the worker starts and says so (activities would fail, none run).
    },
  });
  let output: ChildOutput;
  try {
    output = await expectPollingWorker(child, cluster, 60_000, () => {
      const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
      expect(Number(uid)).toBe(asImageUser ? 2000 : process.getuid?.());
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  // The bundle built at image build time was loaded; nothing was bundled at start.
  expect(output.stdout()).not.toContain('Workflow bundle created');
}, 420_000);
