import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connectOptionsOf, temporalSettingsFromEnv } from '../../client/temporal-env.js';
import { parseEnvFile } from '../../client/local-stack.js';
import { parseWorkerConfig, redactWorkerConfig, WorkerConfigError, type WorkerConfig } from '../../worker/config.js';
import { JsonLogger } from '../../worker/logger.js';

const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
// No temporal.toml from the machine running the tests: HOME points at an empty directory.
const base = { HOME: dir };

function config(argv: string[], env: Record<string, string>): WorkerConfig {
  const parsed = parseWorkerConfig(argv, { ...base, ...env });
  if (parsed === 'help' || 'replayCheck' in parsed) throw new Error('unexpected mode');
  return parsed;
}

describe('worker configuration', () => {
  it('defaults to cluster default on localhost:7233, bundling the workflows at start', () => {
    const c = config([], {});
    expect(c).toMatchObject({
      cluster: 'default',
      taskQueue: 'ferry-default',
      shutdownGraceMs: 25_000,
      logLevel: 'INFO',
      nexus: true,
      watch: true,
      maxCachedWorkflows: 100,
      temporal: { address: 'localhost:7233', addressSource: 'default', namespace: 'default' },
    });
    expect(c.kubeconfig).toBeUndefined();
    expect(c.workflowBundle).toBeUndefined();
    expect(connectOptionsOf(c.temporal)).toEqual({ address: 'localhost:7233' });
  });

  it('hosts the Nexus service unless told off, and refuses anything but on or off', () => {
    expect(config([], { FERRY_NEXUS: 'off' }).nexus).toBe(false);
    expect(config(['--nexus', 'on'], { FERRY_NEXUS: 'off' }).nexus).toBe(true);
    expect(() => config(['--nexus', 'maybe'], {})).toThrow(/nexus "maybe" must be on or off/);
  });

  it('watches unless told off, and keeps as many workflows cached as it is told', () => {
    expect(config([], { FERRY_WATCH: 'off' }).watch).toBe(false);
    expect(config(['--watch', 'on'], { FERRY_WATCH: 'off' }).watch).toBe(true);
    expect(() => config(['--watch', 'sometimes'], {})).toThrow(/watch "sometimes" must be on or off/);
    expect(config([], { FERRY_MAX_CACHED_WORKFLOWS: '20' }).maxCachedWorkflows).toBe(20);
    expect(config(['--max-cached-workflows', '0'], { FERRY_MAX_CACHED_WORKFLOWS: '20' }).maxCachedWorkflows).toBe(0);
    expect(() => config(['--max-cached-workflows', 'many'], {})).toThrow(/max cached workflows "many" must be a whole/);
    expect(() => config([], { FERRY_MAX_CACHED_WORKFLOWS: '-1' })).toThrow(/must be a whole number/);
  });

  it('runs unversioned unless told on; on, as a version of ferry-CLUSTER whose build ID it checks', () => {
    expect(config([], {})).not.toHaveProperty('versioning');
    expect(
      config(['--cluster', 'gpu-a', '--worker-versioning', 'on', '--build-id', '0.2.0-abc123'], {}).versioning,
    ).toEqual({ deploymentName: 'ferry-gpu-a', buildId: '0.2.0-abc123' });
    expect(config([], { FERRY_WORKER_VERSIONING: 'on', FERRY_BUILD_ID: '0.2.0+x' }).versioning?.buildId).toBe(
      '0.2.0+x',
    );
    // From the sources, the build ID is the checkout's: the package version and the commit.
    expect(config([], { FERRY_WORKER_VERSIONING: 'on' }).versioning?.buildId).toMatch(
      /^\d+\.\d+\.\d+-[0-9a-f]{12}(-dirty)?$/,
    );
    expect(() => config(['--worker-versioning', 'pinned'], {})).toThrow(/worker versioning "pinned" must be on or off/);
    expect(() => config(['--worker-versioning', 'on', '--build-id', 'has space'], {})).toThrow(/build ID "has space"/);
    expect(() => config(['--build-id', '1.0.0'], {})).toThrow(/needs --worker-versioning on/);
  });

  it('takes the one-shot commands: the replay gate over the open runs, and making a version current', () => {
    expect(config([], {})).not.toHaveProperty('command');
    expect(config(['--replay-check-open'], {}).command).toBe('replay-check-open');
    expect(config(['--make-current', '--worker-versioning', 'on', '--build-id', '0.2.0-a'], {})).toMatchObject({
      command: 'make-current',
      versioning: { buildId: '0.2.0-a' },
    });
    expect(() => config(['--make-current'], {})).toThrow(/--make-current .* needs --worker-versioning on/);
    expect(() => config(['--make-current', '--replay-check-open', '--worker-versioning', 'on'], {})).toThrow(
      /two commands: give one/,
    );
  });

  it('serves probes and metrics only where told, on a host:port it checks', () => {
    expect(config([], {})).not.toHaveProperty('healthAddress');
    expect(config([], {})).not.toHaveProperty('metricsAddress');
    expect(config([], { FERRY_HEALTH_ADDRESS: ':8080' }).healthAddress).toBe('0.0.0.0:8080');
    expect(config(['--metrics-address', '127.0.0.1:9464'], { FERRY_METRICS_ADDRESS: ':1' }).metricsAddress).toBe(
      '127.0.0.1:9464',
    );
    expect(() => config(['--health-address', 'localhost'], {})).toThrow(/health address: "localhost" is not host:port/);
    expect(() => config([], { FERRY_METRICS_ADDRESS: ':99999' })).toThrow(/metrics address: ":99999" is not host:port/);
  });

  it('gives each model a NetworkPolicy only when told on, and then needs to know the worker pods to admit', () => {
    expect(config([], {})).not.toHaveProperty('networkPolicy');
    const inPod = { KUBERNETES_SERVICE_HOST: '10.0.0.1', FERRY_WORKER_NAMESPACE: 'ferry-system' };
    expect(
      config(['--network-policy', 'on'], {
        ...inPod,
        FERRY_WORKER_POD_LABELS: 'app.kubernetes.io/name=ferry-worker, tier=',
      }).networkPolicy,
    ).toEqual({ namespace: 'ferry-system', podLabels: { 'app.kubernetes.io/name': 'ferry-worker', tier: '' } });
    // Flags win; a local run whose engines are overrides may turn it on too.
    expect(
      config(['--worker-namespace', 'ops', '--worker-pod-labels', 'app=ferry'], {
        FERRY_NETWORK_POLICY: 'ON',
        FERRY_WORKER_NAMESPACE: 'x',
        FERRY_ENDPOINT_MODE: 'override',
        FERRY_ENDPOINT_OVERRIDES: '{}',
      }).networkPolicy,
    ).toEqual({ namespace: 'ops', podLabels: { app: 'ferry' } });
    expect(() => config(['--network-policy', 'yes'], {})).toThrow(/network policy "yes" must be on or off/);
    expect(() => config(['--network-policy', 'on'], { KUBERNETES_SERVICE_HOST: '10.0.0.1' })).toThrow(
      /give --worker-namespace \(FERRY_WORKER_NAMESPACE\).*give --worker-pod-labels/,
    );
    expect(() =>
      config(['--network-policy', 'on'], { ...inPod, FERRY_WORKER_POD_LABELS: 'app=ferry,bad key=x,app2=-no-' }),
    ).toThrow(/label key "bad key" is not a Kubernetes label key.*label value "-no-" \(of app2\)/);
    expect(() => config(['--network-policy', 'on'], { ...inPod, FERRY_WORKER_POD_LABELS: ' , ' })).toThrow(
      /they would admit every pod of the worker namespace/,
    );
    // Outside a pod the worker reaches engines through the API server by default: the policy would shut it out.
    expect(() =>
      config(['--network-policy', 'on', '--worker-namespace', 'ops', '--worker-pod-labels', 'app=ferry'], {}),
    ).toThrow(/needs a worker that reaches engines from its own pod \(FERRY_ENDPOINT_MODE=in-cluster\)/);
  });

  it("reads Temporal's variables and Ferry's, and flags win over both", () => {
    const env = {
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_NAMESPACE: 'ml-platform',
      FERRY_CLUSTER: 'gpu-east',
      KUBECONFIG: '/etc/ferry/kubeconfig',
      FERRY_WORKFLOW_BUNDLE: '/app/workflow-bundle.js',
      FERRY_SHUTDOWN_GRACE: '1m',
      FERRY_LOG_LEVEL: 'debug',
    };
    expect(config([], env)).toMatchObject({
      cluster: 'gpu-east',
      taskQueue: 'ferry-gpu-east',
      kubeconfig: '/etc/ferry/kubeconfig',
      workflowBundle: '/app/workflow-bundle.js',
      shutdownGraceMs: 60_000,
      logLevel: 'DEBUG',
      temporal: { address: 'temporal.internal:7233', addressSource: 'environment', namespace: 'ml-platform' },
    });
    const flags = [
      '--cluster',
      'gpu-west',
      '--temporal-address',
      'other:7233',
      '--temporal-namespace',
      'x',
      '--shutdown-grace=5s',
    ];
    expect(config(flags, env)).toMatchObject({
      cluster: 'gpu-west',
      taskQueue: 'ferry-gpu-west',
      shutdownGraceMs: 5_000,
      temporal: { address: 'other:7233', addressSource: 'flag', namespace: 'x' },
    });
  });

  it('turns TLS on for an API key, and loads client certificates, CA and server name from TEMPORAL_TLS_* paths', () => {
    const withKey = config([], { TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233', TEMPORAL_API_KEY: 'key-123' });
    expect(connectOptionsOf(withKey.temporal)).toEqual({
      address: 'ns.acct.tmprl.cloud:7233',
      apiKey: 'key-123',
      tls: true,
    });

    writeFileSync(join(dir, 'client.pem'), 'CERT');
    writeFileSync(join(dir, 'client.key'), 'KEY');
    writeFileSync(join(dir, 'ca.pem'), 'CA');
    const mtls = config([], {
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_TLS_CLIENT_CERT_PATH: join(dir, 'client.pem'),
      TEMPORAL_TLS_CLIENT_KEY_PATH: join(dir, 'client.key'),
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: join(dir, 'ca.pem'),
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example.com',
    });
    const tls = connectOptionsOf(mtls.temporal).tls;
    expect(tls).toMatchObject({ serverNameOverride: 'temporal.example.com' });
    if (typeof tls !== 'object' || !tls) throw new Error('expected a TLS config');
    expect(Buffer.from(tls.clientCertPair!.crt).toString()).toBe('CERT');
    expect(Buffer.from(tls.clientCertPair!.key).toString()).toBe('KEY');
    expect(Buffer.from(tls.serverRootCACertificate!).toString()).toBe('CA');

    expect(connectOptionsOf(config([], { TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' }).temporal).tls).toBe(false);
  });

  it('reads a temporal.toml profile, which the environment overrides', () => {
    const file = join(dir, 'temporal.toml');
    writeFileSync(
      file,
      [
        '[profile.default]',
        'address = "file-default:7233"',
        '',
        '[profile.prod]',
        'address = "prod:7233"',
        'namespace = "prod-ns"',
      ].join('\n'),
    );
    expect(config([], { TEMPORAL_CONFIG_FILE: file }).temporal).toMatchObject({
      address: 'file-default:7233',
      addressSource: 'config file',
    });
    expect(config(['--profile', 'prod'], { TEMPORAL_CONFIG_FILE: file }).temporal).toMatchObject({
      address: 'prod:7233',
      namespace: 'prod-ns',
      profile: 'prod',
    });
    expect(
      config([], { TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'prod', TEMPORAL_NAMESPACE: 'env-ns' }).temporal,
    ).toMatchObject({
      address: 'prod:7233',
      namespace: 'env-ns',
    });
    expect(() => config(['--profile', 'nope'], { TEMPORAL_CONFIG_FILE: file })).toThrow(/Profile 'nope' not found/);
  });

  it('takes the local stack address only when nothing else names one', () => {
    const local = { TEMPORAL_ADDRESS: '127.0.0.1:7233' };
    expect(temporalSettingsFromEnv(base, {}, local)).toMatchObject({
      address: '127.0.0.1:7233',
      addressSource: 'local stack',
    });
    expect(temporalSettingsFromEnv({ ...base, TEMPORAL_ADDRESS: 'real:7233' }, {}, local).address).toBe('real:7233');
    expect(
      parseEnvFile('# written by up.sh\nKUBECONFIG=/a/b\nexport TEMPORAL_ADDRESS="127.0.0.1:7233"\n\nnot a line\n'),
    ).toEqual({
      KUBECONFIG: '/a/b',
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
    });
  });

  it('rejects what cannot run, listing every problem', () => {
    expect(() => config(['--cluster', 'GPU_East', '--shutdown-grace', 'soon', '--log-level', 'loud'], {})).toThrow(
      /cluster "GPU_East" must be a DNS label.*shutdown grace: invalid duration "soon".*log level "LOUD" must be one of/,
    );
    expect(() => config(['--bogus'], {})).toThrow(WorkerConfigError);
    expect(parseWorkerConfig(['--help'], base)).toBe('help');
  });

  it('never shows a secret in the configuration it logs', () => {
    const c = config([], {
      TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233',
      TEMPORAL_API_KEY: 'super-secret-api-key',
      TEMPORAL_TLS_CLIENT_KEY_DATA: 'PRIVATE KEY BYTES',
      TEMPORAL_GRPC_META_AUTHORIZATION: 'Bearer secret-token',
      FERRY_ENDPOINT_MODE: 'override',
      FERRY_ENDPOINT_OVERRIDES: '{"models/qwen":"http://user:pw@10.0.0.1:8000"}',
    });
    const dump = redactWorkerConfig(c);
    const text = JSON.stringify(dump);
    for (const secret of ['super-secret-api-key', 'PRIVATE KEY BYTES', 'secret-token', 'pw@'])
      expect(text).not.toContain(secret);
    expect(dump).toMatchObject({
      cluster: 'default',
      endpointMode: 'override',
      endpointOverrides: '[inline JSON]',
      temporal: {
        address: 'ns.acct.tmprl.cloud:7233',
        apiKey: '[redacted]',
        tls: { clientKey: '[redacted]' },
        grpcMeta: { authorization: '[redacted]' },
      },
    });
    // The environment is not dumped at all.
    expect(dump).not.toHaveProperty('env');
  });
});

describe('JsonLogger', () => {
  it('writes one JSON object per line and redacts secret-looking keys anywhere in the metadata', () => {
    const lines: string[] = [];
    const logger = new JsonLogger('INFO', (line) => lines.push(line), { component: 'ferry-worker' });
    logger.debug('hidden');
    logger.info('connected', {
      address: 'a:7233',
      apiKey: 'k1',
      nested: { token: 't1', headers: { authorization: 'b' } },
    });
    const cyclic: Record<string, unknown> = { n: 1n };
    cyclic.self = cyclic;
    logger.error('failed', { error: new Error('boom'), cyclic });
    expect(lines).toHaveLength(2);
    expect(lines.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
    const [first, second] = lines.map((l) => JSON.parse(l));
    expect(first).toMatchObject({
      level: 'info',
      msg: 'connected',
      component: 'ferry-worker',
      address: 'a:7233',
      apiKey: '[redacted]',
      nested: { token: '[redacted]', headers: { authorization: '[redacted]' } },
    });
    expect(Date.parse(first.time)).not.toBeNaN();
    expect(second).toMatchObject({
      level: 'error',
      error: { name: 'Error', message: 'boom' },
      cyclic: { n: '1', self: '[circular]' },
    });
  });
});
