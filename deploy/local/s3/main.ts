// The local S3 store, one component of the local stack (with the real engine): the Versity S3 Gateway (versitygw, a
// real S3 server over a directory, Apache-2.0, built from the Go module proxy by install.sh) on a free loopback port,
// and the Hub's front (hub/front.ts) where pods reach it, counting the object bytes it serves per bucket and key.
//
//   FERRY_S3_GATEWAY=<versitygw> FERRY_S3_STATE=<dir> FERRY_S3_LISTEN=10.245.0.1:16449 FERRY_S3_SEED=<git repo> \
//     KUBECONFIG=<kubeconfig> node --import tsx deploy/local/s3/main.ts
//
// In FERRY_S3_STATE: credentials.env (the store's root keys, made once, mode 0600; as AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, the keys a source.s3.credentialsSecret holds), data/ (the buckets), gateway.log. At each
// start it makes the bucket `models` and puts the tiny Llama (FERRY_S3_SEED, a git repository of the local Hub, its
// revision v1) under `ferry-local/tiny-llama/`, and the Secret `local-s3` in namespace `models` with the keys, which
// examples/s3.yaml names. Logs JSON lines to stderr; "s3 ready" once all that is done.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { component, freePort, fronted, readEnvFile } from '../component.js';
import { S3Client } from './client.js';

const SEED_BUCKET = 'models';
const SEED_PREFIX = 'ferry-local/tiny-llama';
const SEED_REVISION = 'v1';

const self = component('s3');
const { log, fail, env } = self;

/** The root keys, made once: the store keeps its data across restarts, so its keys stay too. */
function credentials(state: string): { accessKeyId: string; secretAccessKey: string } {
  const file = join(state, 'credentials.env');
  if (!existsSync(file)) {
    const body = `AWS_ACCESS_KEY_ID=ferry${randomBytes(8).toString('hex')}\nAWS_SECRET_ACCESS_KEY=${randomBytes(24).toString('base64url')}\n`;
    writeFileSync(file, body, { mode: 0o600 });
  }
  const vars = readEnvFile(file);
  return { accessKeyId: vars.AWS_ACCESS_KEY_ID!, secretAccessKey: vars.AWS_SECRET_ACCESS_KEY! };
}

/** Every file of a directory, as paths relative to it. */
function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => statSync(join(dir, f)).isFile());
}

const gateway = env('FERRY_S3_GATEWAY');
const state = resolve(env('FERRY_S3_STATE'));
const seedRepo = env('FERRY_S3_SEED');
const listen = env('FERRY_S3_LISTEN');
mkdirSync(join(state, 'data'), { recursive: true });
const keys = credentials(state);
const port = await freePort();

const { front, tail } = fronted(
  self,
  // The root keys go by environment, never on the command line.
  {
    name: 'versitygw',
    command: gateway,
    args: ['--port', `127.0.0.1:${port}`, '--quiet', 'posix', join(state, 'data')],
    env: { ROOT_ACCESS_KEY: keys.accessKeyId, ROOT_SECRET_KEY: keys.secretAccessKey },
  },
  {
    upstream: `http://127.0.0.1:${port}`,
    listen,
    // Path-style object reads: /<bucket>/<key>, counted per bucket and key.
    parseDownload: (pathname) => {
      const m = /^\/([^/]+)\/(.+)$/.exec(pathname);
      return m
        ? { repo: decodeURIComponent(m[1]!), file: m[2]!.split('/').map(decodeURIComponent).join('/') }
        : undefined;
    },
  },
);

const client = new S3Client({ endpoint: `http://127.0.0.1:${port}`, ...keys });
const deadline = Date.now() + 60_000;
for (;;) {
  const up = await client.createBucket(SEED_BUCKET).then(
    () => true,
    (err: unknown) =>
      Date.now() > deadline
        ? fail('versitygw did not answer within 60s', { error: String(err), lastLines: tail })
        : false,
  );
  if (up) break;
  await sleep(200);
}

// The seed: the tiny Llama's files at revision v1, as the Hub serves them.
const have = new Set(await client.listKeys(SEED_BUCKET, `${SEED_PREFIX}/`));
const tree = mkdtempSync(join(tmpdir(), 'ferry-s3-seed-'));
try {
  const archive = execFileSync('git', ['-C', seedRepo, 'archive', '--format=tar', SEED_REVISION], {
    maxBuffer: 1 << 30,
  });
  execFileSync('tar', ['-x', '-C', tree], { input: archive });
  for (const file of files(tree)) {
    const key = `${SEED_PREFIX}/${relative(tree, join(tree, file))}`;
    if (!have.has(key)) await client.putObject(SEED_BUCKET, key, readFileSync(join(tree, file)));
  }
} finally {
  rmSync(tree, { recursive: true, force: true });
}

// The Secret examples/s3.yaml names.
const kc = new KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(CoreV1Api);
const secret = {
  metadata: { name: 'local-s3' },
  stringData: { AWS_ACCESS_KEY_ID: keys.accessKeyId, AWS_SECRET_ACCESS_KEY: keys.secretAccessKey },
};
await core
  .replaceNamespacedSecret({ name: 'local-s3', namespace: 'models', body: secret })
  .catch(() => core.createNamespacedSecret({ namespace: 'models', body: secret }));

const { url } = await front.start().catch((err: unknown) => fail('the front cannot listen', { error: String(err) }));
log('s3 ready', { url, bucket: SEED_BUCKET, seed: `${SEED_PREFIX}/`, credentials: join(state, 'credentials.env') });
