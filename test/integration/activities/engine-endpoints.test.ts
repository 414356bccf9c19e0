import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { authenticatedFetch } from '../../../activities/cluster/authenticated-fetch.js';
import {
  endpointResolverFromEnv,
  inClusterEndpoint,
  overrideEndpoints,
  serviceProxyEndpoint,
} from '../../../activities/cluster/endpoints.js';
import { clientEndpoint } from '../../../activities/deps.js';
import { testModel } from '../../support/activity-env.js';
import { adminKubeConfig } from '../../support/kube.js';

// Endpoint resolution. The service proxy URL is only built here, never used for a model: simulated pods have no
// process behind their addresses, and nothing in these tests sends traffic to a non-loopback address. Its
// credentials are checked against the local API server itself.
const qwen = testModel('qwen', 'models', { spec: { engine: { port: 8080 } } });
const other = testModel('other', 'team-b');

describe('endpoint resolvers', () => {
  it('in-cluster: the Service’s DNS name and port', async () => {
    expect(inClusterEndpoint(qwen)).toBe('http://qwen.models.svc:8080');
    const { mode, endpoints, http } = endpointResolverFromEnv({ FERRY_ENDPOINT_MODE: 'in-cluster' }, new KubeConfig());
    expect(mode).toBe('in-cluster');
    expect(http).toBeUndefined();
    expect(await endpoints(qwen)).toBe('http://qwen.models.svc:8080');
    // Inside a pod the default is in-cluster.
    expect(endpointResolverFromEnv({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, new KubeConfig()).mode).toBe('in-cluster');
  });

  it('service proxy: the API server path to the Service’s named port, with credentials in its fetch', async () => {
    const kc = adminKubeConfig();
    const server = kc.getCurrentCluster()!.server;
    expect(serviceProxyEndpoint(kc, qwen)).toBe(`${server}/api/v1/namespaces/models/services/qwen:http/proxy`);
    const setup = endpointResolverFromEnv({}, kc);
    expect(setup.mode).toBe('service-proxy');
    expect(await setup.endpoints(qwen)).toBe(serviceProxyEndpoint(kc, qwen));

    // The same fetch reaches the API server with the kubeconfig's identity (plain fetch would be refused).
    const res = await setup.http!(`${server}/api/v1/namespaces/default`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { metadata: { name: string } }).metadata.name).toBe('default');
    expect((await fetch(`${server}/api/v1/namespaces/default`).catch(() => undefined))?.status ?? 0).not.toBe(200);
  });

  it('the authenticated fetch never sends the credentials to another origin', async () => {
    const seen: IncomingHttpHeaders[] = [];
    const srv = createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const { port } = srv.address() as AddressInfo;
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
        users: [{ name: 'u', token: 'do-not-leak' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      const res = await authenticatedFetch(kc)(`http://127.0.0.1:${port}/health`);
      expect(await res.text()).toBe('ok');
      expect(seen[0]?.authorization).toBeUndefined();
    } finally {
      srv.close();
    }
  });

  it('override: a per-model URL; a JSON map, or a file read again on every call', async () => {
    const fixed = overrideEndpoints({ 'models/qwen': 'http://127.0.0.1:9000/' });
    expect(await fixed(qwen)).toBe('http://127.0.0.1:9000');
    await expect(fixed(other)).rejects.toMatchObject({ type: 'EndpointUnknown', nonRetryable: false });
    const withFallback = overrideEndpoints({}, async (m) => inClusterEndpoint(m));
    expect(await withFallback(other)).toBe('http://other.team-b.svc:8000');
    await expect(overrideEndpoints({ 'models/qwen': 'ftp://x' })(qwen)).rejects.toMatchObject({
      type: 'EndpointInvalid',
    });

    const inline = endpointResolverFromEnv(
      { FERRY_ENDPOINT_MODE: 'override', FERRY_ENDPOINT_OVERRIDES: '{"team-b/other": "http://127.0.0.1:9001"}' },
      new KubeConfig(),
    );
    expect(await inline.endpoints(other)).toBe('http://127.0.0.1:9001');

    const file = join(mkdtempSync(join(tmpdir(), 'ferry-endpoints-')), 'endpoints.json');
    const fromFile = endpointResolverFromEnv(
      { FERRY_ENDPOINT_MODE: 'override', FERRY_ENDPOINT_OVERRIDES: file },
      new KubeConfig(),
    );
    await expect(fromFile.endpoints(qwen)).rejects.toMatchObject({ type: 'EndpointUnknown' });
    writeFileSync(file, JSON.stringify({ 'models/qwen': 'http://127.0.0.1:9002' }));
    expect(await fromFile.endpoints(qwen)).toBe('http://127.0.0.1:9002');
    writeFileSync(file, JSON.stringify({ 'models/qwen': 'http://127.0.0.1:9003' }));
    expect(await fromFile.endpoints(qwen)).toBe('http://127.0.0.1:9003');
  });

  it("override, with a front: the worker reaches the engine's own Service where it is listed, clients the model's", async () => {
    const fronted = testModel('qwen', 'models', { spec: { engine: { port: 8080 }, front: {} } });
    const overrides = overrideEndpoints({
      'models/qwen': 'http://127.0.0.1:9100',
      'models/qwen-engine': 'http://127.0.0.1:9200',
    });
    expect(await overrides(fronted)).toBe('http://127.0.0.1:9200');
    expect(await clientEndpoint(overrides, fronted)).toBe('http://127.0.0.1:9100');
    // Overrides that know no engine Service of their own (a real engine's node agent): the model's.
    expect(await overrideEndpoints({ 'models/qwen': 'http://127.0.0.1:9100' })(fronted)).toBe('http://127.0.0.1:9100');
  });

  it("given a pod, each resolver reaches that pod's engine, never another replica", async () => {
    const pod = { name: 'qwen-7d9f-x2x4b', ip: '10.244.1.7' };
    expect(inClusterEndpoint(qwen, pod)).toBe('http://10.244.1.7:8080');
    expect(inClusterEndpoint(qwen, { name: 'v6', ip: 'fd00::7' })).toBe('http://[fd00::7]:8080');
    expect(() => inClusterEndpoint(qwen, { name: 'qwen-new' })).toThrow(/has no IP address yet/);
    const kc = adminKubeConfig();
    expect(serviceProxyEndpoint(kc, qwen, pod)).toBe(
      `${kc.getCurrentCluster()!.server}/api/v1/namespaces/models/pods/qwen-7d9f-x2x4b:8080/proxy`,
    );
    const overrides = overrideEndpoints({
      'models/qwen': 'http://127.0.0.1:9000',
      'models/qwen/qwen-7d9f-x2x4b': 'http://127.0.0.1:9001',
    });
    expect(await overrides(qwen, pod)).toBe('http://127.0.0.1:9001');
    // A pod without its own URL is unknown (retryable), not the model's URL: that is some other replica.
    await expect(overrides(qwen, { name: 'qwen-other' })).rejects.toMatchObject({
      type: 'EndpointUnknown',
      nonRetryable: false,
      message: expect.stringContaining('known: models/qwen/qwen-7d9f-x2x4b'),
    });
  });

  it('rejects a mode it does not know, and override mode without overrides', () => {
    expect(() => endpointResolverFromEnv({ FERRY_ENDPOINT_MODE: 'dns' }, new KubeConfig())).toThrow(/must be one of/);
    expect(() => endpointResolverFromEnv({ FERRY_ENDPOINT_MODE: 'override' }, new KubeConfig())).toThrow(
      /needs FERRY_ENDPOINT_OVERRIDES/,
    );
  });
});
