// The cache of weights' pure parts (docs/design/cache.md): its key, volume, puller Job and affinity.
import { describe, expect, it } from 'vitest';
import {
  ANNOTATION_CACHE_USERS,
  buildCachePullerJob,
  buildCachePvc,
  buildDeployment,
  buildPullerJob,
  cacheAffinity,
  cacheKey,
  cacheUsers,
  isCacheObject,
  LABEL_CACHE,
  LABEL_MODEL,
  usersAnnotation,
  weightsClaim,
  weightsDir,
} from '../../activities/builders/index.js';
import { isModelsOwn, isOurs } from '../../activities/readers/ownership.js';
import {
  immutableChanges,
  parseServedModel,
  safeParseServedModel,
  specForUpdate,
  type ServedModelInput,
} from '../../workflows/contract/index.js';
import { fullHf, minimalHf } from './fixtures.js';

const model = (doc: ServedModelInput, edit: (d: ServedModelInput) => void = () => undefined) => {
  const copy = structuredClone(doc);
  edit(copy);
  return parseServedModel(copy);
};
const s3 = (secret?: string): ServedModelInput => ({
  ...minimalHf,
  spec: {
    source: {
      s3: {
        bucket: 'ckpt',
        prefix: 'run-42/',
        endpoint: 'http://minio.storage:9000',
        ...(secret ? { credentialsSecret: { name: secret } } : {}),
      },
    },
  },
});

describe('the cache key', () => {
  it('is one for a source read through the same Secret, whatever else the models set', () => {
    const a = model(fullHf);
    const b = model(fullHf, (d) => {
      d.metadata.name = 'other';
      d.spec.replicas = 3;
      d.spec.storage = { size: '200Gi' };
    });
    expect(cacheKey(b.spec.source)).toBe(cacheKey(a.spec.source));
    expect(cacheKey(a.spec.source)).toMatch(/^[0-9a-f]{12}$/);
    // The identity's normal form: a prefix with or without its slash is one source.
    expect(cacheKey(model(s3('creds')).spec.source)).toBe(
      cacheKey(model(s3('creds'), (d) => (d.spec.source.s3!.prefix = 'run-42')).spec.source),
    );
  });

  it('differs for another revision, another Secret, or none', () => {
    const keys = [
      model(fullHf),
      model(fullHf, (d) => (d.spec.source.huggingface!.revision = 'main')),
      model(fullHf, (d) => (d.spec.source.huggingface!.tokenSecret = { name: 'other-token', key: 'token' })),
      model(fullHf, (d) => delete d.spec.source.huggingface!.tokenSecret),
      model(s3('creds')),
      model(s3('other-creds')),
      model(s3()),
    ].map((m) => cacheKey(m.spec.source));
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe("the cache's volume", () => {
  it('is named for the key, labelled for the cache and no model, owned by no root, with its first user', () => {
    const m = model(fullHf, (d) => (d.spec.storage = { size: '80Gi', accessMode: 'ReadWriteMany' }));
    const key = cacheKey(m.spec.source);
    const pvc = buildCachePvc(m, 'qwen-chat');
    expect(pvc.metadata).toMatchObject({
      name: `ferry-cache-${key}`,
      namespace: 'models',
      labels: { 'app.kubernetes.io/managed-by': 'ferry', [LABEL_CACHE]: key },
      annotations: { [ANNOTATION_CACHE_USERS]: 'qwen-chat', 'ferry.dev/source': expect.stringContaining('Qwen2.5') },
    });
    expect(pvc.metadata?.labels?.[LABEL_MODEL]).toBeUndefined();
    expect(pvc.metadata?.ownerReferences).toBeUndefined();
    expect(pvc.spec).toMatchObject({ accessModes: ['ReadWriteMany'], resources: { requests: { storage: '80Gi' } } });
    expect(isCacheObject(pvc.metadata?.labels, key)).toBe(true);
    expect(isCacheObject(pvc.metadata?.labels, 'aaaaaaaaaaaa')).toBe(false);
  });

  it('records its users sorted, each once', () => {
    expect(usersAnnotation(['b', 'a/b', 'a', 'b'])).toBe('a,a/b,b');
    const pvc = { metadata: { annotations: { [ANNOTATION_CACHE_USERS]: 'a,a/b' } } };
    expect(cacheUsers(pvc)).toEqual(['a', 'a/b']);
    expect(cacheUsers({ metadata: { annotations: { [ANNOTATION_CACHE_USERS]: '' } } })).toEqual([]);
    expect(cacheUsers(undefined)).toEqual([]);
  });
});

describe("the cache's puller Job", () => {
  it("is the model's puller, into the cache's volume, owned by it, and no model's", () => {
    const m = model(fullHf);
    const key = cacheKey(m.spec.source);
    const job = buildCachePullerJob(m, 'pvc-uid');
    const own = buildPullerJob(m, { rootUid: 'root' });
    expect(job.metadata).toMatchObject({
      name: `ferry-cache-${key}-pull`,
      namespace: 'models',
      labels: { [LABEL_CACHE]: key, 'app.kubernetes.io/component': 'puller' },
      ownerReferences: [{ kind: 'PersistentVolumeClaim', name: `ferry-cache-${key}`, uid: 'pvc-uid' }],
    });
    const labels = job.spec!.template.metadata!.labels!;
    expect(labels[LABEL_MODEL]).toBeUndefined();
    expect(labels).toMatchObject({ team: 'ml-platform', [LABEL_CACHE]: key });
    const pod = job.spec!.template.spec!;
    expect(pod.volumes?.find((v) => v.name === 'weights')?.persistentVolumeClaim?.claimName).toBe(`ferry-cache-${key}`);
    // The same program, image, deadline and destination as the model's own puller.
    expect(pod.containers).toEqual(own.spec!.template.spec!.containers);
    expect(job.spec!.activeDeadlineSeconds).toBe(own.spec!.activeDeadlineSeconds);
    expect(pod.containers[0]!.env).toContainEqual({ name: 'FERRY_DEST', value: weightsDir(m.spec.source) });
  });

  it('runs on the node of the cache’s other pods when the volume is ReadWriteOnce, anywhere when ReadWriteMany', () => {
    const once = model(fullHf, (d) => (d.spec.storage = { accessMode: 'ReadWriteOnce' }));
    const terms = buildCachePullerJob(once, 'u').spec!.template.spec!.affinity?.podAffinity
      ?.requiredDuringSchedulingIgnoredDuringExecution;
    expect(terms).toContainEqual({
      labelSelector: { matchLabels: { [LABEL_CACHE]: cacheKey(once.spec.source) } },
      topologyKey: 'kubernetes.io/hostname',
    });
    const many = model(fullHf, (d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }));
    const affinity = buildCachePullerJob(many, 'u').spec!.template.spec!.affinity;
    expect(affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []).toEqual([]);
    // The model's own affinity is kept beside the cache's.
    const nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } };
    expect(cacheAffinity(once, { nodeAffinity })).toMatchObject({ nodeAffinity });
  });
});

describe('spec.storage.cache', () => {
  const shared = (edit: (d: ServedModelInput) => void = () => undefined) =>
    model(fullHf, (d) => {
      d.spec.storage = { ...d.spec.storage, cache: 'shared' };
      edit(d);
    });
  const issues = (edit: (d: ServedModelInput) => void) => {
    const doc = structuredClone(fullHf) as ServedModelInput;
    doc.spec.storage = { ...doc.spec.storage, cache: 'shared' };
    edit(doc);
    const parsed = safeParseServedModel(doc);
    return parsed.ok ? [] : parsed.issues.map((i) => `${i.path}: ${i.message}`);
  };

  it('is absent from a spec that does not set it, as in a spec accepted before it existed', () => {
    expect('cache' in model(fullHf).spec.storage).toBe(false);
    expect(weightsClaim(model(fullHf))).toBe('qwen-chat-weights');
    expect(weightsClaim(shared())).toBe(`ferry-cache-${cacheKey(shared().spec.source)}`);
  });

  it('refuses adapters, ReadWriteOncePod and a rollout in two slots, each saying why', () => {
    expect(issues((d) => (d.spec.engine!.lora = { enabled: true, adapters: [] }))).toEqual([]);
    expect(
      issues(
        (d) =>
          (d.spec.engine!.lora = {
            enabled: true,
            adapters: [{ name: 'sql', source: { huggingface: { repo: 'org/sql' } } }],
          }),
      ),
    ).toEqual([expect.stringMatching(/^spec\.engine\.lora\.adapters: cannot be used with storage\.cache shared yet/)]);
    expect(
      issues((d) => {
        d.spec.storage!.accessMode = 'ReadWriteOncePod';
        d.spec.replicas = 1;
        delete d.spec.engine!.lora;
      }),
    ).toEqual([expect.stringMatching(/^spec\.storage\.accessMode: cannot be ReadWriteOncePod with storage\.cache/)]);
    expect(
      issues((d) => {
        d.spec.front = {};
        d.spec.rollout = { strategy: 'BlueGreen', steps: [{ traffic: 0 }] };
        delete d.spec.engine!.lora;
      }),
    ).toEqual([expect.stringMatching(/^spec\.rollout\.strategy: cannot be BlueGreen with storage\.cache shared yet/)]);
  });

  it('cannot change on a running model, nor can the source of a model on a shared cache', () => {
    const own = model(fullHf);
    expect(immutableChanges(own, shared())).toEqual(['spec.storage.cache']);
    // `none` is what unset means.
    expect(
      immutableChanges(
        own,
        model(fullHf, (d) => (d.spec.storage = { ...d.spec.storage, cache: 'none' })),
      ),
    ).toEqual([]);
    const otherRevision = shared((d) => (d.spec.source.huggingface!.revision = 'main'));
    expect(immutableChanges(shared(), otherRevision)).toEqual(['spec.source']);
    const otherSecret = shared((d) => (d.spec.source.huggingface!.tokenSecret = { name: 'other', key: 'token' }));
    expect(immutableChanges(shared(), otherSecret)).toEqual(['spec.source']);
    // A model of its own volume may change its source, as before.
    expect(
      immutableChanges(
        own,
        model(fullHf, (d) => (d.spec.source.huggingface!.revision = 'main')),
      ),
    ).toEqual([]);
    const doc = structuredClone(fullHf) as ServedModelInput;
    doc.spec.storage = { ...doc.spec.storage, cache: 'shared' };
    doc.spec.source.huggingface!.revision = 'main';
    expect(() => specForUpdate(shared(), doc)).toThrow(/spec\.source: cannot change from .* a model on a shared cache/);
  });

  it("puts the engine's pods on the cache's volume, labelled for it, on its node when ReadWriteOnce", () => {
    const m = shared((d) => (d.spec.storage = { ...d.spec.storage, accessMode: 'ReadWriteOnce' }));
    const key = cacheKey(m.spec.source);
    const template = buildDeployment(m, { rootUid: 'root' }).spec!.template;
    expect(template.metadata?.labels?.[LABEL_CACHE]).toBe(key);
    expect(template.spec?.volumes?.find((v) => v.name === 'weights')?.persistentVolumeClaim).toEqual({
      claimName: `ferry-cache-${key}`,
      readOnly: true,
    });
    expect(template.spec?.affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution).toContainEqual({
      labelSelector: { matchLabels: { [LABEL_CACHE]: key } },
      topologyKey: 'kubernetes.io/hostname',
    });
    // A model of its own volume: no cache label, its own claim (its pod template as before the field existed).
    const own = buildDeployment(model(fullHf), { rootUid: 'root' }).spec!.template;
    expect(own.metadata?.labels?.[LABEL_CACHE]).toBeUndefined();
    expect(own.spec?.volumes?.find((v) => v.name === 'weights')?.persistentVolumeClaim?.claimName).toBe(
      'qwen-chat-weights',
    );
  });

  it("makes the cache's volume and Job the model's own for claim and reads, never another model's pods", () => {
    const m = shared();
    const pvc = buildCachePvc(m, 'qwen-chat');
    expect(isOurs(pvc, m)).toBe(true);
    expect(isModelsOwn(pvc, m)).toBe(false);
    expect(isOurs(pvc, model(fullHf))).toBe(false);
    expect(
      isOurs(
        pvc,
        shared((d) => (d.spec.source.huggingface!.revision = 'main')),
      ),
    ).toBe(false);
  });
});
