// The front's Kubernetes objects (activities/builders/front-objects.ts): the configuration in a ConfigMap, HAProxy in
// a Deployment that never goes to zero and rolls when the configuration changes, the model's Service moved onto the
// front at the same name and port, and the engine's own Service that the front sends to.
import { describe, expect, it } from 'vitest';
import {
  engineService,
  FRONT_CONTAINER,
  FRONT_METRICS_PORT,
  frontConfigFor,
  frontConfigMap,
  frontDeployment,
  frontedService,
  frontSelectorLabels,
} from '../../activities/builders/front-objects.js';
import { buildService, LABEL_MODEL, rootName, selectorLabels } from '../../activities/builders/index.js';
import { KubeConfig } from '@kubernetes/client-node';
import { inClusterEndpoint, serviceProxyEndpoint } from '../../activities/cluster/endpoints.js';
import { clientEndpoint } from '../../activities/deps.js';
import { loopbackFrontConfig } from '../../deploy/engine-sim/front-proxy.js';
import { parseServedModel, safeParseServedModel } from '../../workflows/contract/index.js';
import { FIXTURE_ROOT_UID, fixtureModel, fixtures } from './fixtures.js';

const model = fixtureModel('minimal-hf');
const { name, namespace } = model.metadata;
const options = { rootUid: FIXTURE_ROOT_UID };
const port = model.spec.engine.port;

describe('the front of a model', () => {
  it("listens on the model's port and sends to the engine's own Service, with its exporter and ready path beside", () => {
    const config = frontConfigFor(model);
    expect(config).toContain(`bind :${port}\n`);
    expect(config).toContain(`server r1 ${name}-engine.${namespace}.svc:${port} weight 100 maxconn 1024`);
    expect(config).toContain('http-response set-header x-ferry-revision %[srv_name]');
    expect(config).toContain(`bind :${FRONT_METRICS_PORT}\n  monitor-uri /ready\n`);
    expect(config).toContain('retries 600');
  });

  it('keeps its configuration in a ConfigMap owned by the root, named after the model', () => {
    const cm = frontConfigMap(model, options);
    expect(cm.metadata).toMatchObject({
      name: `${name}-front`,
      namespace,
      labels: { [LABEL_MODEL]: name, 'app.kubernetes.io/component': 'front' },
      ownerReferences: [{ kind: 'ConfigMap', name: rootName(name), uid: FIXTURE_ROOT_UID }],
    });
    expect(cm.data).toEqual({ 'haproxy.cfg': frontConfigFor(model) });
  });

  it('runs two HAProxy pods that never all go at once, ready on their own path, not on the engine', () => {
    const d = frontDeployment(model, options);
    expect(d.metadata?.name).toBe(`${name}-front`);
    expect(d.spec?.replicas).toBe(2);
    expect(d.spec?.strategy?.rollingUpdate).toMatchObject({ maxUnavailable: 0 });
    expect(d.spec?.selector.matchLabels).toEqual(frontSelectorLabels(name));
    expect(d.spec?.template.metadata?.labels).toMatchObject(frontSelectorLabels(name));
    // The engine's selector and the front's never match each other's pods.
    expect(frontSelectorLabels(name)).not.toMatchObject(selectorLabels(name));
    const pod = d.spec!.template.spec!;
    expect(pod.containers).toHaveLength(1);
    const c = pod.containers[0]!;
    expect(c.name).toBe(FRONT_CONTAINER);
    expect(c.image).toMatch(/^haproxy:\d+\.\d+\.\d+-alpine$/);
    expect(c.command).toEqual(['haproxy', '-W', '-db', '-f', '/usr/local/etc/haproxy/haproxy.cfg']);
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 'metrics' });
    expect(c.ports).toEqual([
      { name: 'http', containerPort: port, protocol: 'TCP' },
      { name: 'metrics', containerPort: FRONT_METRICS_PORT, protocol: 'TCP' },
    ]);
    // No GPU, nothing but a small request; Pod Security "restricted".
    expect(Object.keys(c.resources?.limits ?? {})).toEqual(['memory']);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(pod.volumes).toEqual([{ name: 'config', configMap: { name: `${name}-front` } }]);
    // A request is held up to 600 s: a front pod that is replaced finishes what it holds.
    expect(pod.terminationGracePeriodSeconds).toBe(600);
  });

  it('rolls when its configuration changes, and only then', () => {
    const hash = (config?: string) =>
      frontDeployment(model, options, config).spec?.template.metadata?.annotations?.['ferry.dev/front-config-hash'];
    expect(hash()).toBe(hash(frontConfigFor(model)));
    expect(hash(frontConfigFor(model, { holdSeconds: 60 }))).not.toBe(hash());
  });

  it("moves the model's Service onto the front, with the same name and port; the engine keeps a Service of its own", () => {
    const plain = buildService(model, options);
    const fronted = frontedService(model, options);
    expect(fronted.metadata?.name).toBe(plain.metadata?.name);
    expect(fronted.spec?.ports).toEqual(plain.spec?.ports);
    expect(fronted.spec?.selector).toEqual(frontSelectorLabels(name));
    const engine = engineService(model, options);
    expect(engine.metadata?.name).toBe(`${name}-engine`);
    expect(engine.spec?.selector).toEqual(plain.spec?.selector);
    expect(engine.spec?.ports).toEqual(plain.spec?.ports);
  });

  it('names a long model within 63 characters', () => {
    const long = fixtureModel('minimal-hf');
    long.metadata.name = `m${'x'.repeat(62)}`;
    for (const n of [frontConfigMap(long, options), engineService(long, options)].map((o) => o.metadata!.name!)) {
      expect(n.length).toBeLessThanOrEqual(63);
    }
  });

  it("the worker reaches the engine through the engine's own Service, never the front; status shows the model's", async () => {
    const fronted = fixtureModel('front');
    const ns = fronted.metadata.namespace;
    expect(inClusterEndpoint(fronted)).toBe(`http://qwen-front-engine.${ns}.svc:8000`);
    expect(inClusterEndpoint(model)).toBe(`http://${name}.${namespace}.svc:8000`);
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser({ name: 'c', server: 'https://api:6443', skipTLSVerify: false }, { name: 'u' });
    expect(serviceProxyEndpoint(kc, fronted)).toBe(
      `https://api:6443/api/v1/namespaces/${ns}/services/qwen-front-engine:http/proxy`,
    );
    const resolve = async (m: Parameters<typeof inClusterEndpoint>[0]) => inClusterEndpoint(m);
    expect(await clientEndpoint(resolve, fronted)).toBe(`http://qwen-front.${ns}.svc:8000`);
    // A pod is its own address, front or not.
    expect(inClusterEndpoint(fronted, { name: 'p', ip: '10.0.0.7' })).toBe('http://10.0.0.7:8000');
  });

  it('holds for at most 1h: a longer holdFor is refused on its own field, a parser-only rule', () => {
    const doc = (holdFor: string) => ({ ...fixtures.front, spec: { ...fixtures.front.spec, front: { holdFor } } });
    expect(parseServedModel(doc('1h')).spec.front).toEqual({ holdFor: '1h', maxQueued: 256 });
    const refused = safeParseServedModel(doc('61m'));
    if (refused.ok) throw new Error('61m was accepted');
    expect(refused.issues).toEqual([
      expect.objectContaining({
        path: 'spec.front.holdFor',
        message: 'must be at most 1h: a front pod being replaced is given that long to finish what it holds, got "61m"',
      }),
    ]);
  });
});

describe("the local stack's front (deploy/engine-sim/front-proxy.ts)", () => {
  it("moves the pod's configuration onto loopback and changes nothing else", () => {
    const front = fixtureModel('front');
    const shares = [
      { revision: 'r3', slot: 'a', weight: 90 },
      { revision: 'r4', slot: 'b', weight: 10 },
    ] as const;
    const config = frontConfigFor(front, {}, shares);
    const ports: Record<string, number> = {
      [`${front.metadata.name}-engine`]: 41002,
      [`${front.metadata.name}-b`]: 41003,
    };
    const local = loopbackFrontConfig(config, {
      bind: '127.0.0.1:41000',
      metricsBind: '127.0.0.1:41001',
      engine: (service) => `127.0.0.1:${ports[service]}`,
    });
    const changed = (text: string) => text.split('\n').filter((line) => !config.split('\n').includes(line));
    expect(changed(local)).toEqual([
      '  noreuseport',
      '  bind 127.0.0.1:41000',
      '  bind 127.0.0.1:41001',
      expect.stringMatching(/^ {2}server r3 127\.0\.0\.1:41002 weight 90 maxconn \d+$/),
      expect.stringMatching(/^ {2}server r4 127\.0\.0\.1:41003 weight 10 maxconn \d+$/),
    ]);
    expect(local.split('\n')).toHaveLength(config.split('\n').length + 1);
    expect(local.split('\n').indexOf('  noreuseport')).toBe(local.split('\n').indexOf('global') + 1);
    const engine = () => 'a:3';
    expect(() => loopbackFrontConfig('global\n', { bind: 'a:1', metricsBind: 'a:2', engine })).toThrow(
      '0 bind and 0 server lines',
    );
  });
});
