// A model's two slots (docs/design/rollout.md, section 2): slot b's engine objects carry the names a model called
// `<name>-b` would give its engine, select only their own pods, and stay the model's (its label, its root as owner);
// the worker reaches slot b's engine at its own Service, and the local stack's overrides by its instance.
import { describe, expect, it } from 'vitest';
import {
  admissionConfigMap,
  buildDeployment,
  buildPullerJob,
  buildPvc,
  buildService,
  LABEL_MODEL,
  rootName,
  slotBase,
  slotEngineServiceName,
} from '../../activities/builders/index.js';
import { engineService, frontConfigFor } from '../../activities/builders/front-objects.js';
import { inClusterEndpoint, overrideEndpoints } from '../../activities/cluster/endpoints.js';
import { FIXTURE_ROOT_UID, fixtureModel } from './fixtures.js';

const model = fixtureModel('front');
const { name, namespace } = model.metadata;
const b = { rootUid: FIXTURE_ROOT_UID, slot: 'b' } as const;

describe("a model's slots", () => {
  it('names slot a as the model, and slot b as a model called <name>-b would be (hashed when too long)', () => {
    expect(slotBase(name, undefined)).toBe(name);
    expect(slotBase(name, 'a')).toBe(name);
    expect(slotBase(name, 'b')).toBe(`${name}-b`);
    const long = 'm'.repeat(63);
    expect(slotBase(long, 'b').length).toBeLessThanOrEqual(63);
    expect(slotBase(long, 'b')).toMatch(/-b$/);
    expect(slotEngineServiceName(name, 'a')).toBe(`${name}-engine`);
    expect(slotEngineServiceName(name, 'b')).toBe(`${name}-b`);
  });

  it("builds slot b's engine objects under its names, selecting only its pods, owned by the model's root", () => {
    const deployment = buildDeployment(model, b);
    expect(deployment.metadata?.name).toBe(`${name}-b`);
    expect(deployment.spec?.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/instance': `${name}-b` });
    expect(deployment.spec?.template.metadata?.labels).toMatchObject({
      'app.kubernetes.io/instance': `${name}-b`,
      [LABEL_MODEL]: name,
    });
    expect(deployment.metadata?.labels?.[LABEL_MODEL]).toBe(name);
    expect(deployment.metadata?.ownerReferences?.[0]).toMatchObject({ name: rootName(name), uid: FIXTURE_ROOT_UID });
    expect(deployment.spec?.template.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName).toBe(`${name}-b-weights`);
    // Slot a's selector is the model's as it always was: it never matches slot b's pods.
    const a = buildDeployment(model, { rootUid: FIXTURE_ROOT_UID });
    expect(a.metadata?.name).toBe(name);
    expect(a.spec?.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/instance': name });

    expect(buildPvc(model, b).metadata?.name).toBe(`${name}-b-weights`);
    const job = buildPullerJob(model, b);
    expect(job.metadata?.name).toMatch(new RegExp(`^${name}-b-pull-[0-9a-f]{8}$`));
    expect(job.spec?.template.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName).toBe(`${name}-b-weights`);
    expect(admissionConfigMap(model, undefined, b).metadata?.name).toBe(`${name}-b-admission`);

    // Its engine Service, which the front sends its share to; the model's own Service keeps its name whatever the slot.
    const service = engineService(model, b);
    expect(service.metadata?.name).toBe(`${name}-b`);
    expect(service.spec?.selector).toEqual(deployment.spec?.selector.matchLabels);
    const own = buildService(model, b);
    expect(own.metadata?.name).toBe(name);
    expect(own.spec?.selector).toEqual(deployment.spec?.selector.matchLabels);
  });

  it("sends the front's shares to each slot's engine Service", () => {
    const config = frontConfigFor(model, {}, [
      { revision: 'r1', slot: 'a', weight: 90 },
      { revision: 'r2', slot: 'b', weight: 10 },
    ]);
    expect(config).toContain(`server r1 ${name}-engine.${namespace}.svc:8000 weight 90`);
    expect(config).toContain(`server r2 ${name}-b.${namespace}.svc:8000 weight 10`);
    expect(config).toContain('option redispatch 1');
    // A revision at 0 takes no request: it is left out.
    const alone = frontConfigFor(model, {}, [
      { revision: 'r1', slot: 'a', weight: 0 },
      { revision: 'r2', slot: 'b', weight: 100 },
    ]);
    expect(alone).not.toContain('server r1');
    expect(alone).not.toContain('option redispatch');
  });

  it("reaches slot b's engine at its own Service, and by its instance in the local stack's overrides", async () => {
    expect(inClusterEndpoint({ ...model, slot: 'b' })).toBe(`http://${name}-b.${namespace}.svc:8000`);
    expect(inClusterEndpoint(model)).toBe(`http://${name}-engine.${namespace}.svc:8000`);
    // A model whose front was removed after a rollout: its own Service, on slot b's pods.
    const { front: _front, ...unfronted } = model.spec;
    expect(inClusterEndpoint({ ...model, spec: unfronted, slot: 'b' })).toBe(`http://${name}.${namespace}.svc:8000`);
    const resolve = overrideEndpoints({
      [`${namespace}/${name}`]: 'http://front',
      [`${namespace}/${name}-engine`]: 'http://slot-a',
      [`${namespace}/${name}-b`]: 'http://slot-b',
      [`${namespace}/${name}-b/pod-1`]: 'http://slot-b-pod',
    });
    expect(await resolve(model)).toBe('http://slot-a');
    expect(await resolve({ ...model, slot: 'b' })).toBe('http://slot-b');
    expect(await resolve({ ...model, slot: 'b' }, { name: 'pod-1' })).toBe('http://slot-b-pod');
  });
});
