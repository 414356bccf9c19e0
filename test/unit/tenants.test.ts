// The tenants file and a grant's check (worker/tenants.ts): a file with any wrong part is refused whole, naming it;
// a document outside a grant is refused with one line naming the rule; deny by default.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseServedModel } from '../../workflows/contract/index.js';
import { parseWorkerConfig, WorkerConfigError } from '../../worker/config.js';
import {
  grantRefusal,
  labelledObjects,
  labelRefusal,
  loadTenants,
  parseTenants,
  TenantsFileError,
  type TenantGrant,
} from '../../worker/tenants.js';

const teamA = {
  nexusTaskQueue: 'ferry-nexus-team-a',
  clusters: ['gpu-east'],
  namespaces: ['team-a', 'shared'],
  images: { repositories: ['vllm/vllm-openai:', 'registry.example.com/team-a/'] },
  gpus: { perModel: 4, total: 6 },
  secrets: ['hf-token-a'],
  pvcs: ['checkpoints-a'],
  engineArgs: ['--max-model-len'],
};

const grant = (patch: Record<string, unknown> = {}): TenantGrant =>
  parseTenants({ tenants: { 'team-a': { ...teamA, ...patch } } })[0]!;

type Spec = Record<string, any>;
const model = (patch: (spec: Spec, metadata: Spec) => void = () => undefined) => {
  const doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name: 'qwen', namespace: 'team-a' },
    spec: {
      cluster: 'gpu-east',
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    } as Spec,
  };
  patch(doc.spec, doc.metadata);
  return parseServedModel(doc);
};

describe('the tenants file', () => {
  it('reads each tenant with its defaults: no Secrets, no PVCs, no env, only tags or digests as written', () => {
    const [tenant] = parseTenants({ tenants: { 'team-a': { ...teamA, secrets: undefined, engineArgs: undefined } } });
    expect(tenant).toMatchObject({
      name: 'team-a',
      secrets: [],
      pvcs: ['checkpoints-a'],
      engineArgs: [],
      env: [],
      images: { digestsOnly: false },
    });
  });

  it('refuses a file with a missing or wrong part, naming the field', () => {
    const { clusters: _clusters, ...noClusters } = teamA;
    expect(() => parseTenants({ tenants: { 'team-a': noClusters } })).toThrow(/tenants\.team-a\.clusters/);
    expect(() => parseTenants({ tenants: { 'team-a': { ...teamA, namespaces: [] } } })).toThrow(
      /must name at least one namespace/,
    );
    expect(() => parseTenants({ tenants: { 'Team A': teamA } })).toThrow(TenantsFileError);
    expect(() => parseTenants({ tenants: { 'team-a': { ...teamA, gpu: 1 } } })).toThrow(/unknown field/);
    expect(() => parseTenants({ tenants: { 'team-a': { ...teamA, env: 'any' } } })).toThrow(/"free" or a list/);
  });

  it('refuses two tenants on one task queue, and a per-model limit above the total', () => {
    expect(() => parseTenants({ tenants: { 'team-a': teamA, 'team-b': teamA } })).toThrow(
      /tenants team-a and team-b have the same nexusTaskQueue/,
    );
    expect(() => parseTenants({ tenants: { 'team-a': { ...teamA, gpus: { perModel: 8, total: 4 } } } })).toThrow(
      /perModel \(8\) is more than its total \(4\)/,
    );
  });

  it('stops the worker from starting when the file is wrong or unreadable', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-tenants-'));
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'tenants:\n  team-a:\n    clusters: [gpu-east]\n');
    const env = { HOME: dir, FERRY_TENANTS_FILE: bad };
    expect(() => parseWorkerConfig([], env)).toThrow(WorkerConfigError);
    expect(() => parseWorkerConfig([], env)).toThrow(/tenants\.team-a\.nexusTaskQueue: is required/);
    expect(() => parseWorkerConfig(['--tenants', join(dir, 'absent.yaml')], { HOME: dir })).toThrow(
      /tenants file .*absent\.yaml: ENOENT/,
    );
    const good = join(dir, 'good.yaml');
    writeFileSync(good, JSON.stringify({ tenants: { 'team-a': teamA } }));
    expect(() => parseWorkerConfig(['--tenants', good, '--nexus', 'off'], { HOME: dir })).toThrow(/needs --nexus on/);
    const config = parseWorkerConfig(['--tenants', good], { HOME: dir });
    expect(config).toMatchObject({ tenants: [{ name: 'team-a', nexusTaskQueue: 'ferry-nexus-team-a' }] });
    expect(loadTenants(good)).toHaveLength(1);
  });
});

describe("a tenant's grant", () => {
  it('allows a document inside it', () => {
    expect(grantRefusal(grant(), model(), 0)).toBeUndefined();
    expect(
      grantRefusal(
        grant(),
        model((spec) => {
          spec.engine = { args: ['--max-model-len', '4096'], apiKeySecret: undefined };
          spec.source = { pvc: { claimName: 'checkpoints-a', path: 'run-1' } };
          spec.resources = { gpus: 2 };
          spec.replicas = 2;
        }),
        2,
      ),
    ).toBeUndefined();
  });

  it('refuses, in one line naming the rule, each thing outside it', () => {
    const refused = (patch: (spec: Spec, metadata: Spec) => void, others = 0, g = grant()) =>
      grantRefusal(g, model(patch), others);
    expect(refused((_s, m) => (m.namespace = 'prod'))).toBe('tenant team-a may not serve into namespace prod');
    expect(refused((s) => (s.cluster = 'gpu-west'))).toBe('tenant team-a may not serve into cluster gpu-west');
    expect(refused((s) => (s.engine = { image: 'evil.example.com/vllm:1' }))).toMatch(
      /^tenant team-a may not run image "evil.example.com\/vllm:1" \(engine.image\): allowed are/,
    );
    expect(refused((s) => (s.puller = { image: 'busybox' }))).toMatch(/may not run image "busybox" \(puller.image\)/);
    expect(refused(() => undefined, 0, grant({ images: { repositories: ['vllm/'], digestsOnly: true } }))).toMatch(
      /may run images only by digest \(engine.image: "vllm\/vllm-openai:v[\d.]+" has no @sha256/,
    );
    expect(refused((s) => ((s.resources = { gpus: 3 }), (s.replicas = 2)))).toBe(
      'tenant team-a may hold 4 GPUs per model, this one asks for 6 (resources.gpus × replicas)',
    );
    expect(refused((s) => (s.resources = { gpus: 2 }), 5)).toBe(
      'tenant team-a may hold 6 GPUs in total; its other models hold 5, this one asks for 2',
    );
    expect(refused((s) => (s.source.huggingface.tokenSecret = { name: 'hf-token-b', key: 'token' }))).toBe(
      'tenant team-a may not read Secret hf-token-b (source.huggingface.tokenSecret)',
    );
    expect(refused((s) => (s.engine = { apiKeySecret: { name: 'keys', key: 'k' } }))).toBe(
      'tenant team-a may not read Secret keys (engine.apiKeySecret)',
    );
    expect(
      refused(
        (s) => (s.puller = { env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'aws', key: 'k' } } }] }),
        0,
        grant({ env: 'free' }),
      ),
    ).toBe('tenant team-a may not read Secret aws (puller.env X)');
    expect(refused((s) => (s.source = { pvc: { claimName: 'checkpoints-b' } }))).toBe(
      'tenant team-a may not mount PersistentVolumeClaim checkpoints-b (source.pvc)',
    );
    expect(refused((s) => (s.engine = { args: ['--enforce-eager'] }))).toBe(
      'tenant team-a may not pass --enforce-eager in engine.args (allowed: --max-model-len)',
    );
    // As vLLM reads it: --max_model_len is --max-model-len; a value is not a flag.
    expect(refused((s) => (s.engine = { args: ['--max_model_len=4096'] }))).toBeUndefined();
    expect(refused((s) => (s.engine = { env: [{ name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' }] }))).toBe(
      'tenant team-a may not set VLLM_LOGGING_LEVEL in engine.env (its grant allows none)',
    );
    expect(
      refused(
        (s) => (s.engine = { args: ['--enforce-eager'], env: [{ name: 'A', value: '1' }] }),
        0,
        grant({ engineArgs: 'free', env: ['A'] }),
      ),
    ).toBeUndefined();
  });

  it('checks the total only when told what the other models hold', () => {
    expect(
      grantRefusal(
        grant(),
        model((s) => (s.resources = { gpus: 4 })),
      ),
    ).toBeUndefined();
    expect(
      grantRefusal(
        grant(),
        model((s) => (s.resources = { gpus: 4 })),
        3,
      ),
    ).toMatch(/6 GPUs in total/);
  });
});

describe('Secrets and PVCs a grant allows by their labels', () => {
  const labelled = grant({
    secrets: ['hf-token-a', { matchLabels: { 'ferry.dev/tenant': 'team-a' } }],
    pvcs: [{ matchLabels: { 'ferry.dev/tenant': 'team-a', tier: 'weights' } }],
  });
  const withSecret = (name: string) => model((s) => (s.source.huggingface.tokenSecret = { name, key: 'token' }));
  const onClaim = (claimName: string) => model((s) => (s.source = { pvc: { claimName, path: 'qwen' } }));

  it('reads selectors beside names, and refuses an empty or malformed one, naming it', () => {
    expect(labelled.secrets).toEqual(['hf-token-a', { matchLabels: { 'ferry.dev/tenant': 'team-a' } }]);
    expect(() => grant({ secrets: [{ matchLabels: {} }] })).toThrow(
      /tenants\.team-a\.secrets\.0.*must name at least one label/,
    );
    expect(() => grant({ pvcs: [{ matchLabels: { 'bad key': 'x' } }] })).toThrow(/tenants\.team-a\.pvcs\.0/);
    expect(() => grant({ secrets: [{ labels: { a: 'b' } }] })).toThrow(/tenants\.team-a\.secrets\.0/);
  });

  it('leaves an unlisted name to the cluster when a selector could allow it, and lists what the cluster must read', () => {
    expect(grantRefusal(labelled, withSecret('hf-labelled'))).toBeUndefined();
    expect(labelledObjects(labelled, withSecret('hf-labelled'))).toEqual([
      { kind: 'Secret', name: 'hf-labelled', field: 'source.huggingface.tokenSecret' },
    ]);
    // Listed by name: nothing to read. Without selectors: refused at once, as before.
    expect(labelledObjects(labelled, withSecret('hf-token-a'))).toEqual([]);
    expect(grantRefusal(grant(), withSecret('hf-labelled'))).toBe(
      'tenant team-a may not read Secret hf-labelled (source.huggingface.tokenSecret)',
    );
    expect(labelledObjects(grant(), withSecret('hf-labelled'))).toEqual([]);
    expect(labelledObjects(labelled, onClaim('ckpt'))).toEqual([
      { kind: 'PersistentVolumeClaim', name: 'ckpt', field: 'source.pvc' },
    ]);
  });

  it('allows an object whose labels hold all of one selector, and refuses, naming it, one that does not or is missing', () => {
    const labels = (found: Record<string, Record<string, string>>) => (kind: string, name: string) =>
      found[`${kind}/${name}`];
    expect(
      labelRefusal(
        labelled,
        withSecret('hf-x'),
        labels({ 'Secret/hf-x': { 'ferry.dev/tenant': 'team-a', more: '1' } }),
      ),
    ).toBeUndefined();
    expect(
      labelRefusal(labelled, withSecret('hf-x'), labels({ 'Secret/hf-x': { 'ferry.dev/tenant': 'team-b' } })),
    ).toBe(
      'tenant team-a may not read Secret hf-x (source.huggingface.tokenSecret): it is not listed, and its labels match none of "ferry.dev/tenant=team-a"',
    );
    expect(
      labelRefusal(
        labelled,
        onClaim('ckpt'),
        labels({ 'PersistentVolumeClaim/ckpt': { 'ferry.dev/tenant': 'team-a' } }),
      ),
    ).toBe(
      'tenant team-a may not mount PersistentVolumeClaim ckpt (source.pvc): it is not listed, and its labels match none of "ferry.dev/tenant=team-a,tier=weights"',
    );
    expect(labelRefusal(labelled, withSecret('hf-gone'), labels({}))).toBe(
      'tenant team-a may not read Secret hf-gone (source.huggingface.tokenSecret): it is not listed, and there is no such Secret in namespace team-a whose labels could allow it',
    );
  });
});

describe("a grant's storage classes and tolerations", () => {
  const withClass = (storageClassName: string | null) => model((s) => (s.storage = { storageClassName }));
  const tolerating = (...tolerations: Spec[]) => model((s) => (s.scheduling = { tolerations }));

  it("allows the cluster's default class always, and a named class only when listed", () => {
    expect(grant().storageClasses).toEqual([]);
    expect(grantRefusal(grant(), withClass(null))).toBeUndefined();
    expect(grantRefusal(grant(), withClass('fast-ssd'))).toBe(
      "tenant team-a may not use StorageClass fast-ssd (storage.storageClassName): allowed is only the cluster's default class (null)",
    );
    expect(grantRefusal(grant({ storageClasses: ['fast-ssd'] }), withClass('fast-ssd'))).toBeUndefined();
    expect(grantRefusal(grant({ storageClasses: ['fast-ssd'] }), withClass('premium'))).toBe(
      "tenant team-a may not use StorageClass premium (storage.storageClassName): allowed are fast-ssd and the cluster's default class (null)",
    );
  });

  it('allows no toleration by default, the taint keys listed, or any with free; never every taint unless free', () => {
    const gpu = { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' };
    const dedicated = { key: 'dedicated', operator: 'Equal', value: 'team-b', effect: 'NoSchedule' };
    expect(grantRefusal(grant(), tolerating())).toBeUndefined();
    expect(grantRefusal(grant(), tolerating(gpu))).toBe(
      'tenant team-a may not tolerate taint nvidia.com/gpu (scheduling.tolerations) (its grant allows none)',
    );
    const gpuOnly = grant({ tolerations: ['nvidia.com/gpu'] });
    expect(grantRefusal(gpuOnly, tolerating(gpu))).toBeUndefined();
    expect(grantRefusal(gpuOnly, tolerating(gpu, dedicated))).toBe(
      'tenant team-a may not tolerate taint dedicated (scheduling.tolerations) (allowed: nvidia.com/gpu)',
    );
    expect(grantRefusal(gpuOnly, tolerating({ operator: 'Exists' }))).toBe(
      'tenant team-a may not tolerate every taint (scheduling.tolerations: a toleration with no key)',
    );
    expect(grantRefusal(grant({ tolerations: 'free' }), tolerating({ operator: 'Exists' }), 0)).toBeUndefined();
    expect(() => grant({ storageClasses: ['Not A Class'] })).toThrow(/tenants\.team-a\.storageClasses\.0/);
  });
});
