import { spawnSync } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1EnvVar,
  V1Job,
  V1PodDisruptionBudget,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
  V1Service,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { networkPolicyOf } from '../../../worker/network-policy-setting.js';
import { parseTenants } from '../../../worker/tenants.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import {
  cacheDir,
  chartDir,
  chartRefusal,
  helm,
  renderChart,
  renderChartText,
  type ChartRelease,
} from '../../support/helm.js';
import { readLocalEnv } from '../../support/local-env.js';

// The worker's Helm chart, deploy/helm/ferry-worker: linted, rendered for each of its options, refused for bad values
// by values.schema.json (or by the template's own checks, for combinations), and sent to the local API server as a
// server-side dry run. test/integration/activities/worker-rbac.test.ts installs its output and runs a model's life
// under its Role.

const FULL = 'ci/full-values.yaml';

interface ServiceMonitor extends KubernetesObject {
  spec: {
    namespaceSelector: { matchNames: string[] };
    selector: { matchLabels: Record<string, string> };
    endpoints: { port: string; path: string; interval: string; scrapeTimeout?: string }[];
  };
}

/** The one object of `kind` (and `name`); throws when there is none or more than one. */
function only<T extends KubernetesObject>(objects: KubernetesObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  if (found.length !== 1) {
    const all = objects.map((o) => `${o.kind}/${o.metadata?.namespace}/${o.metadata?.name}`).join(', ');
    throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length} among: ${all}`);
  }
  return found[0] as T;
}

const kinds = (objects: KubernetesObject[]) => objects.map((o) => o.kind ?? '').sort();
const deploymentOf = (chart: ChartRelease = {}) => only<V1Deployment>(renderChart(chart), 'Deployment');
const containerOf = (d: V1Deployment) => d.spec!.template.spec!.containers[0]!;
const envOf = (d: V1Deployment): Record<string, V1EnvVar> =>
  Object.fromEntries((containerOf(d).env ?? []).map((e) => [e.name, e]));
const valuesOf = (d: V1Deployment) =>
  Object.fromEntries((containerOf(d).env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));

/** The Role the worker needs in each namespace it serves: worker-rbac.yaml's, and Events it posts (create, patch). */
const WORKER_RULES: V1PolicyRule[] = [
  {
    apiGroups: [''],
    resources: ['configmaps', 'persistentvolumeclaims', 'services'],
    verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
  },
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
  {
    apiGroups: ['inference.networking.k8s.io'],
    resources: ['inferencepools'],
    verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
  },
  { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
  { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
  { apiGroups: [''], resources: ['events'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
];
/** Only with endpointMode service-proxy: the engines through the API server. */
const NETWORK_POLICY_RULE: V1PolicyRule = {
  apiGroups: ['networking.k8s.io'],
  resources: ['networkpolicies'],
  verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
};
const PROXY_RULES: V1PolicyRule[] = [
  { apiGroups: [''], resources: ['services/proxy'], verbs: ['get'] },
  { apiGroups: [''], resources: ['pods/proxy'], verbs: ['get', 'create'] },
];

describe('helm lint --strict', () => {
  it.each([
    ['the default values', []],
    ['every option set (ci/full-values.yaml)', ['--values', join(chartDir, FULL)]],
  ])('passes with %s', (_what, args) => {
    const run = helm(['lint', '--strict', chartDir, ...args]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });
});

describe('the chart with its default values', () => {
  const objects = renderChart();
  const deployment = only<V1Deployment>(objects, 'Deployment', 'ferry-worker');
  const pod = deployment.spec!.template;
  const container = containerOf(deployment);

  it('renders the worker, its ServiceAccount, a PodDisruptionBudget and a metrics Service, in the release namespace', () => {
    expect(kinds(objects)).toEqual(['Deployment', 'PodDisruptionBudget', 'Service', 'ServiceAccount']);
    // No Namespace: `helm install --namespace … --create-namespace` makes it, the operator labels it.
    expect(objects.map((o) => o.metadata?.namespace)).toEqual(objects.map(() => 'ferry-system'));
    expect(only<V1ServiceAccount>(objects, 'ServiceAccount').metadata?.name).toBe('ferry-worker');
    expect(pod.spec?.serviceAccountName).toBe('ferry-worker');
    expect(container.image).toBe('ferry-worker:0.1.0');
  });

  it('configures the worker through its environment', () => {
    expect(valuesOf(deployment)).toEqual({
      FERRY_CLUSTER: 'default',
      FERRY_ENDPOINT_MODE: 'in-cluster',
      FERRY_LOG_LEVEL: 'INFO',
      FERRY_SHUTDOWN_GRACE: '25s',
      FERRY_HEALTH_ADDRESS: ':8080',
      FERRY_METRICS_ADDRESS: ':9464',
      // Sized for 1,000 Ready models in the 1 GiB limit (docs/operations.md, "Sizing the worker").
      NODE_OPTIONS: '--max-old-space-size=256',
      FERRY_MAX_CACHED_WORKFLOWS: '50',
      // Two replicas by default: they share the watch's wakes by a Lease per namespace.
      FERRY_WATCH_LEASE: 'on',
      TEMPORAL_ADDRESS: 'temporal-frontend.temporal.svc:7233',
      TEMPORAL_NAMESPACE: 'default',
    });
    // No API key and no TLS unless asked for.
    expect(Object.keys(envOf(deployment)).filter((n) => /API_KEY|TLS/.test(n))).toEqual([]);
    // A heap limit of 0 leaves Node's default.
    expect(valuesOf(deploymentOf({ values: { heapLimitMiB: 0 } })).NODE_OPTIONS).toBeUndefined();
    // One replica has nobody to share the wakes with: no Lease.
    expect(valuesOf(deploymentOf({ values: { replicaCount: 1 } })).FERRY_WATCH_LEASE).toBeUndefined();
    expect(pod.spec?.terminationGracePeriodSeconds).toBe(30);
  });

  it('probes /healthz and /readyz on the port named health, and exposes metrics on the port named metrics', () => {
    expect(container.ports).toEqual([
      { name: 'health', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
    ]);
    expect(container.livenessProbe).toEqual({
      httpGet: { path: '/healthz', port: 'health' },
      periodSeconds: 10,
      failureThreshold: 3,
    });
    expect(container.readinessProbe).toEqual({
      httpGet: { path: '/readyz', port: 'health' },
      periodSeconds: 10,
      failureThreshold: 2,
    });
    expect(container.startupProbe).toEqual({
      httpGet: { path: '/healthz', port: 'health' },
      periodSeconds: 2,
      failureThreshold: 60,
    });
  });

  it('runs as Pod Security "restricted" requires, read-only, with a bounded /tmp and bounded resources', () => {
    expect(pod.spec?.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 2000,
      runAsGroup: 0,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(pod.spec?.volumes).toEqual([{ name: 'tmp', emptyDir: { sizeLimit: '256Mi' } }]);
    expect(container.resources).toEqual({ requests: { cpu: '250m', memory: '768Mi' }, limits: { memory: '1Gi' } });
  });

  it("selects the worker's pods, and only them, from the Deployment, the PodDisruptionBudget and the Service", () => {
    const selector = deployment.spec!.selector.matchLabels!;
    expect(selector).toEqual({
      'app.kubernetes.io/name': 'ferry-worker',
      'app.kubernetes.io/instance': 'ferry-worker',
    });
    expect(pod.metadata?.labels).toMatchObject(selector);
    const pdb = only<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget');
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: selector } });
    const service = only<V1Service>(objects, 'Service');
    expect(service.metadata?.name).toBe('ferry-worker-metrics');
    expect(service.spec).toEqual({
      type: 'ClusterIP',
      selector,
      ports: [{ name: 'metrics', port: 9464, targetPort: 'metrics', protocol: 'TCP' }],
    });
  });
});

describe('the namespaces served', () => {
  const objects = renderChart({ values: { namespaces: ['team-a', 'team-b'] } });

  it('get a Role with exactly the rules the worker needs and a RoleBinding to its ServiceAccount, each', () => {
    for (const namespace of ['team-a', 'team-b']) {
      const inNamespace = objects.filter((o) => o.metadata?.namespace === namespace);
      expect(kinds(inNamespace)).toEqual(['Role', 'RoleBinding']);
      const role = only<V1Role>(inNamespace, 'Role');
      expect(role.metadata?.name).toBe('ferry-worker');
      expect(role.rules).toEqual(WORKER_RULES);
      const binding = only<V1RoleBinding>(inNamespace, 'RoleBinding');
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'ferry-worker' });
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'ferry-worker', namespace: 'ferry-system' }]);
    }
    // Nothing is granted in the release namespace itself.
    expect(kinds(objects.filter((o) => o.metadata?.namespace === 'ferry-system'))).not.toContain('Role');
  });

  it('let the worker get the listed API-key Secrets and no other, only in their namespace', () => {
    const keyed = renderChart({
      values: { namespaces: ['team-a', 'team-b'], apiKeySecrets: { 'team-a': ['qwen-key'] } },
    });
    const roleIn = (ns: string) =>
      only<V1Role>(
        keyed.filter((o) => o.metadata?.namespace === ns),
        'Role',
      );
    expect(roleIn('team-a').rules).toEqual([
      ...WORKER_RULES,
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['qwen-key'], verbs: ['get'] },
    ]);
    expect(roleIn('team-b').rules).toEqual(WORKER_RULES);
    expect(chartRefusal({ values: { namespaces: ['team-a'], apiKeySecrets: { prod: ['k'] } } })).toContain(
      'apiKeySecrets names namespace prod, which namespaces does not list',
    );
    expect(chartRefusal({ values: { namespaces: ['team-a'], apiKeySecrets: { 'team-a': ['Not_A_Name'] } } })).toContain(
      'apiKeySecrets',
    );
  });

  it('grant the proxy subresources only to a worker that reaches engines through the API server', () => {
    const proxied = renderChart({ values: { namespaces: ['team-a'], endpointMode: 'service-proxy' } });
    expect(only<V1Role>(proxied, 'Role').rules).toEqual([...WORKER_RULES, ...PROXY_RULES]);
  });

  it.each<[string, ChartRelease]>([
    ['default values', {}],
    ['two namespaces', { values: { namespaces: ['team-a', 'team-b'] } }],
    ['every option', { valuesFiles: [FULL] }],
    ['no ServiceAccount of its own', { values: { namespaces: ['a'], serviceAccount: { create: false, name: 'x' } } }],
  ])('grant nothing cluster-wide: no ClusterRole or ClusterRoleBinding with %s', (_what, chart) => {
    const rendered = renderChart(chart);
    expect(rendered.length).toBeGreaterThan(0);
    expect(kinds(rendered).filter((k) => k.startsWith('Cluster') || k === 'Namespace')).toEqual([]);
  });

  it('grant listing nodes and pods cluster-wide, and nothing more, only with rbac.placement (placement at start)', () => {
    const rendered = renderChart({ values: { rbac: { create: true, placement: true } } });
    expect(kinds(rendered).filter((k) => k.startsWith('Cluster'))).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    expect(only<V1Role>(rendered, 'ClusterRole').rules).toEqual([
      { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['list'] },
    ]);
    expect(only<V1RoleBinding>(rendered, 'ClusterRoleBinding')).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'ferry-worker-placement' },
      subjects: [{ kind: 'ServiceAccount', name: 'ferry-worker', namespace: 'ferry-system' }],
    });
  });

  it('bind an existing ServiceAccount when the chart creates none', () => {
    const rendered = renderChart({
      values: { namespaces: ['team-a'], serviceAccount: { create: false, name: 'ops-ferry' } },
    });
    expect(kinds(rendered)).not.toContain('ServiceAccount');
    expect(only<V1Deployment>(rendered, 'Deployment').spec?.template.spec?.serviceAccountName).toBe('ops-ferry');
    expect(only<V1RoleBinding>(rendered, 'RoleBinding').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'ops-ferry', namespace: 'ferry-system' },
    ]);
    expect(chartRefusal({ values: { serviceAccount: { create: false } } })).toContain(
      'serviceAccount.name: name the existing ServiceAccount',
    );
  });

  it('are left to the operator with rbac.create=false', () => {
    const rendered = renderChart({ values: { namespaces: ['team-a'], rbac: { create: false } } });
    expect(kinds(rendered)).toEqual(['Deployment', 'PodDisruptionBudget', 'Service', 'ServiceAccount']);
  });
});

describe('the Temporal credentials', () => {
  it('take the API key from a Secret, never from values', () => {
    const d = deploymentOf({ values: { temporal: { apiKey: { secretName: 'ferry-temporal', key: 'token' } } } });
    expect(envOf(d).TEMPORAL_API_KEY).toEqual({
      name: 'TEMPORAL_API_KEY',
      valueFrom: { secretKeyRef: { name: 'ferry-temporal', key: 'token' } },
    });
    // A literal key has nowhere to go: not as the value, not beside the Secret, not through extraEnv.
    expect(chartRefusal({ values: { temporal: { apiKey: 'sk-literal' } } })).toContain(
      "at '/temporal/apiKey': got string, want object",
    );
    expect(chartRefusal({ values: { temporal: { apiKey: { value: 'sk-literal' } } } })).toContain(
      "additional properties 'value' not allowed",
    );
    expect(chartRefusal({ values: { extraEnv: [{ name: 'TEMPORAL_API_KEY', value: 'sk-literal' }] } })).toContain(
      'extraEnv sets TEMPORAL_API_KEY, which the chart sets from temporal.apiKey',
    );
  });

  it('mount the mTLS Secret read-only and point TEMPORAL_TLS_* at its files', () => {
    const d = deploymentOf({
      values: {
        temporal: {
          tls: {
            enabled: true,
            secretName: 'ferry-mtls',
            clientCertKey: 'cert.pem',
            clientKeyKey: 'key.pem',
            serverCAKey: 'ca.pem',
            serverName: 'temporal.internal',
          },
        },
      },
    });
    const env = valuesOf(d);
    expect(env).toMatchObject({ TEMPORAL_TLS: 'true', TEMPORAL_TLS_SERVER_NAME: 'temporal.internal' });
    const volume = d.spec!.template.spec!.volumes!.find((v) => v.secret)!;
    expect(volume.secret).toEqual({
      secretName: 'ferry-mtls',
      defaultMode: 0o440,
      items: [
        { key: 'cert.pem', path: 'client.crt' },
        { key: 'key.pem', path: 'client.key' },
        { key: 'ca.pem', path: 'ca.crt' },
      ],
    });
    const mount = containerOf(d).volumeMounts!.find((m) => m.name === volume.name)!;
    expect(mount.readOnly).toBe(true);
    // Each path names a file of the mounted volume, from the Secret key given for it.
    const fileOf = (variable: string) => {
      const path = env[variable]!;
      expect(dirname(path)).toBe(mount.mountPath);
      return volume.secret!.items!.find((i) => i.path === basename(path))?.key;
    };
    expect(fileOf('TEMPORAL_TLS_CLIENT_CERT_PATH')).toBe('cert.pem');
    expect(fileOf('TEMPORAL_TLS_CLIENT_KEY_PATH')).toBe('key.pem');
    expect(fileOf('TEMPORAL_TLS_SERVER_CA_CERT_PATH')).toBe('ca.pem');
  });

  it('mount only the CA for TLS without a client certificate, and nothing for TLS with the system CAs', () => {
    const caOnly = deploymentOf({
      values: { temporal: { tls: { enabled: true, secretName: 'ca', clientCertKey: '', clientKeyKey: '' } } },
    });
    expect(Object.keys(envOf(caOnly)).filter((n) => n.startsWith('TEMPORAL_TLS'))).toEqual([
      'TEMPORAL_TLS',
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    ]);
    expect(caOnly.spec!.template.spec!.volumes!.find((v) => v.secret)?.secret?.items).toEqual([
      { key: 'ca.crt', path: 'ca.crt' },
    ]);
    const systemCAs = deploymentOf({ values: { temporal: { tls: { enabled: true } } } });
    expect(Object.keys(envOf(systemCAs)).filter((n) => n.startsWith('TEMPORAL_TLS'))).toEqual(['TEMPORAL_TLS']);
    expect(systemCAs.spec!.template.spec!.volumes).toEqual([{ name: 'tmp', emptyDir: { sizeLimit: '256Mi' } }]);
  });

  it.each<[string, object, string]>([
    [
      'a Secret without TLS',
      { tls: { secretName: 'x' } },
      'temporal.tls.secretName is set but temporal.tls.enabled is false',
    ],
    [
      'a certificate without its key',
      { tls: { enabled: true, secretName: 'x', clientKeyKey: '' } },
      'temporal.tls.clientCertKey and temporal.tls.clientKeyKey go together',
    ],
    [
      'a server name without TLS',
      { tls: { serverName: 'x' } },
      'temporal.tls.serverName is set but the connection is not TLS',
    ],
  ])('refuse %s', (_what, temporal, message) => {
    expect(chartRefusal({ values: { temporal } })).toContain(message);
  });
});

describe('every option', () => {
  const objects = renderChart({ valuesFiles: [FULL] });
  // With Worker Versioning on, each version is a Deployment named after its build ID: this release's.
  const deployment = only<V1Deployment>(objects, 'Deployment', 'ferry-gpu-west-0-2-0-1a2b3c4d5e6f');
  const pod = deployment.spec!.template;
  const container = containerOf(deployment);

  it('reaches the worker: cluster, endpoint mode, log level, Temporal, ports, shutdown grace, extra env', () => {
    expect(valuesOf(deployment)).toEqual({
      FERRY_CLUSTER: 'gpu-west',
      FERRY_ENDPOINT_MODE: 'service-proxy',
      FERRY_LOG_LEVEL: 'DEBUG',
      FERRY_SHUTDOWN_GRACE: '55s',
      FERRY_HEALTH_ADDRESS: ':8081',
      FERRY_METRICS_ADDRESS: ':9465',
      FERRY_WATCH_LEASE: 'on',
      FERRY_WORKER_VERSIONING: 'on',
      FERRY_BUILD_ID: '0.2.0-1a2b3c4d5e6f',
      TEMPORAL_ADDRESS: 'my-ns.a1b2c.tmprl.cloud:7233',
      TEMPORAL_NAMESPACE: 'my-ns.a1b2c',
      TEMPORAL_UI_URL: 'https://cloud.temporal.io',
      TEMPORAL_TLS: 'true',
      TEMPORAL_TLS_CLIENT_CERT_PATH: '/etc/ferry/temporal-tls/client.crt',
      TEMPORAL_TLS_CLIENT_KEY_PATH: '/etc/ferry/temporal-tls/client.key',
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/etc/ferry/temporal-tls/ca.crt',
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example.com',
      NODE_OPTIONS: '--max-old-space-size=640',
      FERRY_MAX_CACHED_WORKFLOWS: '200',
      FERRY_TENANTS_FILE: '/etc/ferry/tenants/tenants.yaml',
    });
    expect(envOf(deployment).TEMPORAL_GRPC_META_X_TEAM?.valueFrom).toEqual({
      configMapKeyRef: { name: 'ferry-meta', key: 'team' },
    });
    expect(pod.spec?.terminationGracePeriodSeconds).toBe(60);
    expect(container.ports?.map((p) => [p.name, p.containerPort])).toEqual([
      ['health', 8081],
      ['metrics', 9465],
    ]);
  });

  it('shapes the pod: image, replicas, resources, scheduling, annotations, labels, pull secrets', () => {
    expect(container.image).toBe('registry.example.com/ferry-worker:0.1.0-rc.1');
    expect(container.imagePullPolicy).toBe('Always');
    expect(pod.spec?.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(deployment.spec?.replicas).toBe(2);
    expect(container.resources).toEqual({ requests: { cpu: '500m', memory: '1Gi' }, limits: { memory: '2Gi' } });
    expect(pod.spec?.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.spec?.tolerations).toEqual([
      { key: 'dedicated', operator: 'Equal', value: 'control', effect: 'NoSchedule' },
    ]);
    expect(pod.spec?.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
    expect(pod.metadata?.annotations).toEqual({
      'example.com/owner': 'ml-platform',
      'checksum/tenants': expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(pod.metadata?.labels).toMatchObject({ team: 'ml-platform', ...deployment.spec?.selector.matchLabels });
    expect(pod.spec?.serviceAccountName).toBe('ferry');
    expect(only<V1ServiceAccount>(objects, 'ServiceAccount', 'ferry').metadata?.annotations).toEqual({
      'iam.gke.io/gcp-service-account': 'ferry@example.iam.gserviceaccount.com',
    });
  });

  it('merges probe and security settings into the defaults instead of replacing them', () => {
    expect(container.livenessProbe).toEqual({
      httpGet: { path: '/healthz', port: 'health' },
      periodSeconds: 20,
      failureThreshold: 3,
    });
    expect(container.readinessProbe?.failureThreshold).toBe(3);
    expect(container.startupProbe?.failureThreshold).toBe(90);
    expect(pod.spec?.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 3000,
      runAsGroup: 0,
      fsGroup: 3000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext?.capabilities).toEqual({ drop: ['ALL'] });
    expect(pod.spec?.volumes?.find((v) => v.name === 'tmp')).toEqual({ name: 'tmp', emptyDir: { sizeLimit: '512Mi' } });
  });

  it('keeps the selector labels when podLabels name them', () => {
    const d = deploymentOf({ values: { podLabels: { 'app.kubernetes.io/name': 'other', team: 'x' } } });
    expect(d.spec?.template.metadata?.labels).toMatchObject({ ...d.spec?.selector.matchLabels, team: 'x' });
  });

  it('sets minAvailable instead of maxUnavailable, a percentage, or no PodDisruptionBudget', () => {
    // Over every version's pods (the Deployments add their build's label to the selector).
    const { 'ferry.dev/worker-build': build, ...allVersions } = deployment.spec!.selector.matchLabels!;
    expect(build).toBe('0-2-0-1a2b3c4d5e6f');
    expect(only<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget').spec).toEqual({
      minAvailable: 1,
      selector: { matchLabels: allVersions },
    });
    const percent = renderChart({ values: { podDisruptionBudget: { maxUnavailable: '50%' } } });
    expect(only<V1PodDisruptionBudget>(percent, 'PodDisruptionBudget').spec?.maxUnavailable).toBe('50%');
    expect(kinds(renderChart({ values: { podDisruptionBudget: { enabled: false } } }))).not.toContain(
      'PodDisruptionBudget',
    );
  });

  it('scrapes metrics through the Service, and a ServiceMonitor only when enabled', () => {
    const service = only<V1Service>(objects, 'Service', 'ferry-gpu-west-metrics');
    expect(service.metadata?.annotations).toEqual({ 'prometheus.io/scrape': 'true' });
    expect(service.spec?.ports).toEqual([{ name: 'metrics', port: 9465, targetPort: 'metrics', protocol: 'TCP' }]);
    const monitor = only<ServiceMonitor>(objects, 'ServiceMonitor');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata?.labels).toMatchObject({ release: 'prometheus' });
    expect(monitor.spec).toEqual({
      namespaceSelector: { matchNames: ['ferry-system'] },
      selector: { matchLabels: service.spec?.selector },
      endpoints: [{ port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s' }],
    });
    expect(service.metadata?.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(kinds(renderChart())).not.toContain('ServiceMonitor');
    const withoutService = renderChart({ values: { metrics: { service: { enabled: false } } } });
    expect(kinds(withoutService)).not.toContain('Service');
    expect(
      chartRefusal({ values: { metrics: { service: { enabled: false }, serviceMonitor: { enabled: true } } } }),
    ).toContain('metrics.serviceMonitor.enabled needs metrics.service.enabled');
  });

  it('refuses extra env that would shadow a variable the chart sets, and ports that collide', () => {
    expect(chartRefusal({ values: { extraEnv: [{ name: 'FERRY_CLUSTER', value: 'x' }] } })).toContain(
      'extraEnv sets FERRY_CLUSTER, which the chart sets from cluster: set that value instead',
    );
    expect(
      chartRefusal({ values: { extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=9' }] } }),
    ).toContain('extraEnv sets NODE_OPTIONS, which the chart sets from heapLimitMiB');
    // Without the heap limit, NODE_OPTIONS is the operator's.
    const own = { heapLimitMiB: 0, extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=900' }] };
    expect(valuesOf(deploymentOf({ values: own })).NODE_OPTIONS).toBe('--max-old-space-size=900');
    expect(chartRefusal({ values: { healthPort: 9464 } })).toContain('healthPort and metrics.port are both 9464');
  });
});

describe('upgrades (docs/upgrading.md)', () => {
  const versioned = { versioning: { enabled: true }, image: { tag: '0.2.0' } };
  const jobOf = (objects: KubernetesObject[], name: string) => only<V1Job>(objects, 'Job', `ferry-worker-${name}`);

  it('checks before an upgrade that the open runs replay on the new image, and not at install', () => {
    expect(kinds(renderChart())).not.toContain('Job');
    const job = jobOf(renderChart({ upgrade: true, values: { image: { tag: '0.2.0' } } }), 'replay-check');
    expect(job.metadata?.annotations).toMatchObject({ 'helm.sh/hook': 'pre-upgrade' });
    const container = job.spec!.template.spec!.containers[0]!;
    expect(container).toMatchObject({ image: 'ferry-worker:0.2.0', args: ['--replay-check-open'] });
    expect(Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]))).toMatchObject({
      FERRY_CLUSTER: 'default',
      TEMPORAL_ADDRESS: 'temporal-frontend.temporal.svc:7233',
    });
    expect(job.spec).toMatchObject({ backoffLimit: 0, template: { spec: { restartPolicy: 'Never' } } });
    expect(kinds(renderChart({ upgrade: true, values: { replayCheck: { enabled: false } } }))).not.toContain('Job');
  });

  it('runs each version of the worker as a Deployment of its own, the kept ones beside the new one', () => {
    const objects = renderChart({
      values: { ...versioned, versioning: { enabled: true, keep: [{ buildId: '0.1.0+abc', imageTag: '0.1.0' }] } },
    });
    const [current, kept] = [
      only<V1Deployment>(objects, 'Deployment', 'ferry-worker-0-2-0'),
      only<V1Deployment>(objects, 'Deployment', 'ferry-worker-0-1-0-abc'),
    ];
    expect(containerOf(current).image).toBe('ferry-worker:0.2.0');
    expect(valuesOf(current)).toMatchObject({ FERRY_WORKER_VERSIONING: 'on', FERRY_BUILD_ID: '0.2.0' });
    expect(containerOf(kept).image).toBe('ferry-worker:0.1.0');
    expect(valuesOf(kept)).toMatchObject({ FERRY_WORKER_VERSIONING: 'on', FERRY_BUILD_ID: '0.1.0+abc' });
    // Each selects its own pods only; the PodDisruptionBudget and the metrics Service cover both.
    expect(current.spec!.selector.matchLabels).toMatchObject({ 'ferry.dev/worker-build': '0-2-0' });
    expect(kept.spec!.selector.matchLabels).toMatchObject({ 'ferry.dev/worker-build': '0-1-0-abc' });
    expect(current.spec!.template.metadata!.labels).toMatchObject({ 'ferry.dev/worker-build': '0-2-0' });
    const pdb = only<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget');
    expect(pdb.spec!.selector!.matchLabels).not.toHaveProperty('ferry.dev/worker-build');
    // After install or upgrade, the new version is made current.
    const made = jobOf(objects, 'make-current');
    expect(made.metadata?.annotations).toMatchObject({ 'helm.sh/hook': 'post-install,post-upgrade' });
    const container = made.spec!.template.spec!.containers[0]!;
    expect(container.args).toEqual(['--make-current']);
    expect(Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]))).toMatchObject({
      FERRY_WORKER_VERSIONING: 'on',
      FERRY_BUILD_ID: '0.2.0',
    });
  });

  it('names the build ID after versioning.buildId when set, and refuses a version kept twice or without versioning', () => {
    const objects = renderChart({ values: { versioning: { enabled: true, buildId: '0.2.0-1a2b3c' } } });
    expect(valuesOf(only<V1Deployment>(objects, 'Deployment', 'ferry-worker-0-2-0-1a2b3c'))).toMatchObject({
      FERRY_BUILD_ID: '0.2.0-1a2b3c',
    });
    expect(
      chartRefusal({
        values: { ...versioned, versioning: { enabled: true, keep: [{ buildId: '0.2.0', imageTag: 'x' }] } },
      }),
    ).toContain("versioning.keep: build ID 0.2.0 is this release's or another kept one's");
    expect(chartRefusal({ values: { versioning: { keep: [{ buildId: '0.1.0', imageTag: '0.1.0' }] } } })).toContain(
      'versioning.keep lists versions of a Worker Deployment: it needs versioning.enabled=true',
    );
    expect(chartRefusal({ values: { extraEnv: [{ name: 'FERRY_BUILD_ID', value: 'x' }] } })).toContain(
      'extraEnv sets FERRY_BUILD_ID, which the chart sets from versioning.buildId',
    );
  });
});

describe('tenants (docs/security.md)', () => {
  const tenants = {
    'team-a': {
      nexusTaskQueue: 'ferry-nexus-team-a',
      clusters: ['default'],
      namespaces: ['team-a'],
      images: { repositories: ['vllm/vllm-openai:'] },
      gpus: { perModel: 2, total: 4 },
      engineArgs: 'free',
    },
  };

  it('reach the worker as a file it reads as it would its own, and roll it when they change', () => {
    const objects = renderChart({ values: { namespaces: ['team-a'], tenants } });
    const deployment = only<V1Deployment>(objects, 'Deployment');
    expect(envOf(deployment).FERRY_TENANTS_FILE?.value).toBe('/etc/ferry/tenants/tenants.yaml');
    const config = only<V1ConfigMap>(objects, 'ConfigMap', 'ferry-worker-tenants');
    // What the worker reads at start: the same grant, with the same defaults.
    expect(parseTenants(parseYaml(config.data!['tenants.yaml']!))).toEqual([
      {
        ...tenants['team-a'],
        name: 'team-a',
        images: { repositories: ['vllm/vllm-openai:'], digestsOnly: false },
        secrets: [],
        pvcs: [],
        env: [],
        storageClasses: [],
        tolerations: [],
      },
    ]);
    const pod = deployment.spec!.template;
    expect(containerOf(deployment).volumeMounts).toContainEqual({
      name: 'tenants',
      mountPath: '/etc/ferry/tenants',
      readOnly: true,
    });
    expect(pod.spec?.volumes).toContainEqual({ name: 'tenants', configMap: { name: 'ferry-worker-tenants' } });
    const changed = renderChart({
      values: { namespaces: ['team-a'], tenants: { 'team-a': { ...tenants['team-a'], namespaces: ['prod'] } } },
    });
    const checksum = (o: KubernetesObject[]) =>
      only<V1Deployment>(o, 'Deployment').spec!.template.metadata?.annotations?.['checksum/tenants'];
    expect(checksum(objects)).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum(changed)).not.toBe(checksum(objects));
  });

  it('let the worker get Secrets in the namespaces of a grant that allows Secrets by their labels, and only there', () => {
    const bySelector = {
      'team-a': { ...tenants['team-a'], secrets: ['hf-a', { matchLabels: { 'ferry.dev/tenant': 'team-a' } }] },
      'team-b': {
        ...tenants['team-a'],
        nexusTaskQueue: 'ferry-nexus-team-b',
        namespaces: ['team-b'],
        secrets: ['hf-b'],
      },
    };
    const objects = renderChart({ values: { namespaces: ['team-a', 'team-b'], tenants: bySelector } });
    const roleIn = (ns: string) =>
      only<V1Role>(
        objects.filter((o) => o.metadata?.namespace === ns),
        'Role',
      );
    expect(roleIn('team-a').rules).toEqual([
      ...WORKER_RULES,
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ]);
    expect(roleIn('team-b').rules).toEqual(WORKER_RULES);
    // The worker reads the selector as written.
    const config = only<V1ConfigMap>(objects, 'ConfigMap', 'ferry-worker-tenants');
    expect(parseTenants(parseYaml(config.data!['tenants.yaml']!))[0]!.secrets).toEqual(bySelector['team-a'].secrets);
    expect(
      chartRefusal({ values: { tenants: { 'team-a': { ...tenants['team-a'], pvcs: [{ matchLabels: {} }] } } } }),
    ).toContain("at '/tenants/team-a/pvcs/0'");
  });

  it('are none by default: no file, no variable', () => {
    const objects = renderChart();
    expect(kinds(objects)).not.toContain('ConfigMap');
    expect(envOf(only<V1Deployment>(objects, 'Deployment')).FERRY_TENANTS_FILE).toBeUndefined();
  });

  it.each<[string, object, string]>([
    [
      'a grant without GPUs',
      { nexusTaskQueue: 'q', clusters: ['a'], namespaces: ['a'], images: { repositories: ['x/'] } },
      "missing property 'gpus'",
    ],
    ['a misspelt field', { ...tenants['team-a'], namespace: ['a'] }, "additional properties 'namespace' not allowed"],
    ['engineArgs in words', { ...tenants['team-a'], engineArgs: 'any' }, "at '/tenants/team-a/engineArgs'"],
  ])('refuse %s, naming the value', (_what, grant, message) => {
    expect(chartRefusal({ values: { tenants: { 'team-a': grant } } })).toContain(message);
  });
});

describe('a NetworkPolicy per model (networkPolicy.enabled)', () => {
  it("tells the worker its namespace and its pods' labels, which the worker reads as the peer to admit", () => {
    const objects = renderChart({ values: { namespaces: ['team-a'], networkPolicy: { enabled: true } } });
    const deployment = only<V1Deployment>(objects, 'Deployment');
    const env = envOf(deployment);
    expect(env.FERRY_NETWORK_POLICY?.value).toBe('on');
    expect(env.FERRY_WORKER_NAMESPACE?.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
    // What the worker makes of it (the kubelet fills in the namespace): labels its own pods carry.
    const problems: string[] = [];
    const peer = networkPolicyOf(
      {},
      {
        FERRY_NETWORK_POLICY: 'on',
        FERRY_WORKER_NAMESPACE: 'ferry-system',
        FERRY_WORKER_POD_LABELS: env.FERRY_WORKER_POD_LABELS!.value!,
        FERRY_ENDPOINT_MODE: env.FERRY_ENDPOINT_MODE!.value!,
      },
      problems,
    );
    expect(problems).toEqual([]);
    expect(Object.keys(peer!.podLabels).length).toBeGreaterThan(0);
    expect(deployment.spec!.template.metadata!.labels).toMatchObject(peer!.podLabels);
    // The Role may then manage the models' policies; without the setting it may not.
    expect(only<V1Role>(objects, 'Role').rules).toEqual([...WORKER_RULES, NETWORK_POLICY_RULE]);
    const off = renderChart({ values: { namespaces: ['team-a'] } });
    expect(only<V1Role>(off, 'Role').rules).toEqual(WORKER_RULES);
    expect(envOf(only<V1Deployment>(off, 'Deployment')).FERRY_NETWORK_POLICY).toBeUndefined();
  });

  it('is refused with endpointMode service-proxy, and in extra env', () => {
    expect(chartRefusal({ values: { networkPolicy: { enabled: true }, endpointMode: 'service-proxy' } })).toContain(
      'networkPolicy.enabled needs endpointMode in-cluster',
    );
    expect(chartRefusal({ values: { extraEnv: [{ name: 'FERRY_NETWORK_POLICY', value: 'on' }] } })).toContain(
      'networkPolicy.enabled',
    );
  });
});

describe('values.schema.json', () => {
  it.each<[string, object, string]>([
    ['namespaces not a list', { namespaces: 'team-a' }, "at '/namespaces': got string, want array"],
    [
      'a namespace that is no DNS label',
      { namespaces: ['Team A'] },
      "at '/namespaces/0': 'Team A' does not match pattern",
    ],
    ['a missing cluster name', { cluster: null }, "missing property 'cluster'"],
    [
      'a cluster name that is no DNS label',
      { cluster: 'GPU_West' },
      "at '/cluster': 'GPU_West' does not match pattern",
    ],
    ['a misspelt value', { namespace: ['team-a'] }, "additional properties 'namespace' not allowed"],
    ['an unknown endpoint mode', { endpointMode: 'override' }, "at '/endpointMode': value must be one of"],
    ['a Temporal address without a port', { temporal: { address: 'temporal' } }, "at '/temporal/address'"],
    ['a Web UI URL without its scheme', { temporal: { webUiUrl: 'temporal.example.com' } }, "at '/temporal/webUiUrl'"],
    ['a negative replica count', { replicaCount: -1 }, "at '/replicaCount': minimum: got -1, want 0"],
    [
      'a grace period shorter than the drain',
      { terminationGracePeriodSeconds: 5 },
      "at '/terminationGracePeriodSeconds'",
    ],
    [
      'a budget that is no number or percentage',
      { podDisruptionBudget: { maxUnavailable: 'one' } },
      "at '/podDisruptionBudget/maxUnavailable'",
    ],
    [
      'a scrape interval in words',
      { metrics: { serviceMonitor: { interval: '30 seconds' } } },
      "at '/metrics/serviceMonitor/interval'",
    ],
    ['extra env without a name', { extraEnv: [{ value: 'x' }] }, "at '/extraEnv/0': missing property 'name'"],
  ])('refuses %s, naming the value', (_what, values, message) => {
    const refusal = chartRefusal({ values });
    expect(refusal).toContain("values don't meet the specifications of the schema(s)");
    expect(refusal).toContain(message);
  });

  it('refuses the same values at `helm install` as at `helm template`', () => {
    const kubeconfig = readLocalEnv().KUBECONFIG;
    const install = ['install', 'ferry-worker', chartDir, '--kubeconfig', kubeconfig, '--dry-run=client'];
    const run = helm([...install, '--set', 'namespaces=team-a']);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("at '/namespaces': got string, want array");
  });
});

describe('a server-side dry run against the local API server', () => {
  // `warn` as well as `enforce`: Pod Security admission judges a Deployment's pod template only in its warn and
  // audit modes (enforce acts on pods), so the warning is what shows a template that pods would be refused for.
  const system = useNamespace('helm-system', { ...RESTRICTED, 'pod-security.kubernetes.io/warn': 'restricted' });
  const teamA = useNamespace('helm-team-a');
  const teamB = useNamespace('helm-team-b');
  const kubectl = join(cacheDir, 'bin/kubectl');

  function dryRun(chart: ChartRelease) {
    const text = renderChartText({ ...chart, namespace: system.ns });
    const run = spawnSync(
      kubectl,
      ['--kubeconfig', readLocalEnv().KUBECONFIG, 'apply', '--dry-run=server', '-f', '-'],
      {
        input: text,
        encoding: 'utf8',
      },
    );
    if (run.error) throw run.error;
    return { status: run.status, stdout: run.stdout, stderr: run.stderr };
  }

  it.each<[string, (served: string[]) => ChartRelease]>([
    ['the default values', (namespaces) => ({ values: { namespaces } })],
    // The local cluster has no Prometheus Operator, so no ServiceMonitor kind to dry-run against.
    [
      'every option',
      (namespaces) => ({
        valuesFiles: [FULL],
        values: { namespaces, metrics: { serviceMonitor: { enabled: false } } },
      }),
    ],
  ])('accepts %s with no Pod Security warning', (_what, chart) => {
    const release = chart([teamA.ns, teamB.ns]);
    const run = dryRun(release);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const objects = renderChart({ ...release, namespace: system.ns });
    expect(run.stdout.trim().split('\n')).toHaveLength(objects.length);
    expect(run.stdout).toContain('(server dry run)');
  });

  it('warns about a pod template that Pod Security "restricted" would refuse', () => {
    const run = dryRun({ values: { namespaces: [teamA.ns], securityContext: { allowPrivilegeEscalation: true } } });
    expect(run.stderr).toContain('would violate PodSecurity "restricted:latest"');
  });
});
