// The local OCI registry, one component of the local stack (with the real engine): the CNCF distribution registry
// (v3, Apache-2.0, built from the Go module proxy by install.sh) with htpasswd authentication on a free loopback port,
// and the Hub's front (hub/front.ts) where pods reach it, counting the blob bytes it serves per repository and digest.
//
//   FERRY_REGISTRY_BIN=<registry> FERRY_REGISTRY_STATE=<dir> FERRY_REGISTRY_LISTEN=10.245.0.1:16450 \
//     FERRY_REGISTRY_SEED=<git repo> KUBECONFIG=<kubeconfig> node --import tsx deploy/local/registry/main.ts
//
// In FERRY_REGISTRY_STATE: credentials.env (the user `ferry` and its password, made once, mode 0600), htpasswd (its
// bcrypt hash), config.yml (written at each start), data/ (the blobs). At each start it pushes the tiny Llama
// (FERRY_REGISTRY_SEED, a git repository of the local Hub, its revision v1) as the artifact ferry-local/tiny-llama:v1,
// one layer per file as `oras push` makes them, and writes the Secret `local-registry` (a kubernetes.io/dockerconfigjson)
// in namespace `models`, which examples/oci.yaml names. Logs JSON lines to stderr; "registry ready" once all is done.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { component, freePort, fronted, readEnvFile } from '../component.js';
import { RegistryClient } from './client.js';

const SEED_REPOSITORY = 'ferry-local/tiny-llama';
const SEED_REVISION = 'v1';

const self = component('registry');
const { log, fail, env } = self;

const binary = env('FERRY_REGISTRY_BIN');
const state = resolve(env('FERRY_REGISTRY_STATE'));
const seedRepo = env('FERRY_REGISTRY_SEED');
const listen = env('FERRY_REGISTRY_LISTEN');
mkdirSync(join(state, 'data'), { recursive: true });

// The user and its password, made once; the htpasswd file holds its bcrypt hash (the registry takes only bcrypt),
// made at each start by Python's crypt with the password on stdin, at bcrypt's lowest cost: the registry checks it on
// every request, and at the default cost that is a quarter of a second each.
const credentialsFile = join(state, 'credentials.env');
if (!existsSync(credentialsFile)) {
  const password = randomBytes(18).toString('base64url');
  writeFileSync(credentialsFile, `REGISTRY_USERNAME=ferry\nREGISTRY_PASSWORD=${password}\n`, { mode: 0o600 });
}
const vars = readEnvFile(credentialsFile);
const auth = { username: vars.REGISTRY_USERNAME!, password: vars.REGISTRY_PASSWORD! };
const hash = execFileSync(
  'python3',
  [
    '-W',
    'ignore::DeprecationWarning',
    '-c',
    'import crypt, sys; print(crypt.crypt(sys.stdin.read(), crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))',
  ],
  { input: auth.password, encoding: 'utf8' },
).trim();
writeFileSync(join(state, 'htpasswd'), `${auth.username}:${hash}\n`, { mode: 0o600 });

const port = await freePort();
writeFileSync(
  join(state, 'config.yml'),
  [
    '# Written by deploy/local/registry/main.ts at each start.',
    'version: 0.1',
    'log:',
    '  level: warn',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${JSON.stringify(join(state, 'data'))}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    'auth:',
    '  htpasswd:',
    '    realm: ferry-local',
    `    path: ${JSON.stringify(join(state, 'htpasswd'))}`,
    '',
  ].join('\n'),
);

const upstream = `http://127.0.0.1:${port}`;
const { front, tail } = fronted(
  self,
  {
    name: 'the registry',
    command: binary,
    args: ['serve', join(state, 'config.yml')],
    env: { OTEL_TRACES_EXPORTER: 'none' },
  },
  {
    upstream,
    listen,
    // Blob reads: /v2/<repository>/blobs/<digest>, counted per repository and digest.
    parseDownload: (pathname) => {
      const m = /^\/v2\/(.+)\/blobs\/(sha256:[0-9a-f]{64})$/.exec(pathname);
      return m ? { repo: m[1]!, file: m[2]! } : undefined;
    },
  },
);

const deadline = Date.now() + 60_000;
for (;;) {
  const status = await fetch(`${upstream}/v2/`).then(
    (res) => res.status,
    () => 0,
  );
  if (status === 401 || status === 200) break;
  if (Date.now() > deadline) fail('the registry did not answer within 60s', { lastLines: tail });
  await sleep(200);
}

// The seed: the tiny Llama's files at revision v1, as the Hub serves them.
const files = new Map<string, Buffer>();
const listing = execFileSync('git', ['-C', seedRepo, 'ls-tree', '-r', '--name-only', SEED_REVISION], {
  encoding: 'utf8',
});
for (const path of listing.split('\n').filter(Boolean)) {
  files.set(path, execFileSync('git', ['-C', seedRepo, 'show', `${SEED_REVISION}:${path}`], { maxBuffer: 1 << 30 }));
}
const digest = await new RegistryClient(upstream, auth).pushArtifact(SEED_REPOSITORY, SEED_REVISION, files);

// The Secret examples/oci.yaml names: a docker config, as for imagePullSecrets.
const kc = new KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(CoreV1Api);
const basic = Buffer.from(`${auth.username}:${auth.password}`).toString('base64');
const secret = {
  metadata: { name: 'local-registry' },
  type: 'kubernetes.io/dockerconfigjson',
  stringData: { '.dockerconfigjson': JSON.stringify({ auths: { [listen]: { ...auth, auth: basic } } }) },
};
await core
  .replaceNamespacedSecret({ name: 'local-registry', namespace: 'models', body: secret })
  .catch(() => core.createNamespacedSecret({ namespace: 'models', body: secret }));

const { url } = await front.start().catch((err: unknown) => fail('the front cannot listen', { error: String(err) }));
log('registry ready', { url, seed: `${SEED_REPOSITORY}:${SEED_REVISION}`, digest, credentials: credentialsFile });
