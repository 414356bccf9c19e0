// The cache of weights' pure parts (docs/design/cache.md): its key, volume, puller Job and affinity.
import { describe, expect, it } from 'vitest';
import {
  ANNOTATION_CACHE_USERS,
  buildCachePullerJob,
  buildCachePvc,
  buildPullerJob,
  cacheAffinity,
  cacheKey,
  cacheUsers,
  isCacheObject,
  LABEL_CACHE,
  LABEL_MODEL,
  usersAnnotation,
  weightsDir,
} from '../../activities/builders/index.js';
import { parseServedModel, type ServedModelInput } from '../../workflows/contract/index.js';
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
