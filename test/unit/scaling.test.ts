// spec.scaling: what the parser accepts and refuses, the policy the Deployment carries, the count a workflow keeps in
// force, and the load the autoscaler reads from a replica's /metrics (as the engine stand-in renders it).
import { describe, expect, it } from 'vitest';
import { buildAll, buildDeployment } from '../../activities/builders/index.js';
import { ANNOTATION_SCALING } from '../../activities/builders/labels.js';
import { replicaLoad } from '../../activities/scaling/load.js';
import { EngineMetrics, type SchedulerLoad } from '../../deploy/engine-sim/metrics.js';
import {
  expiredProblem,
  parseServedModel,
  safeParseServedModel,
  scalingPolicy,
  startingReplicas,
  type ServedModelInput,
} from '../../workflows/contract/index.js';
import { initialStatus } from '../../workflows/status/transitions.js';
import {
  decisionRefusal,
  engineReplicas,
  engineScale,
  KEPT_SCALE_ENTRIES,
  withRecentScaleEntries,
} from '../../workflows/steps/scale.js';
import { parseServingDocument } from '../../client/document.js';
import { minimalHf } from './fixtures.js';

const withSpec = (spec: Record<string, unknown>): ServedModelInput => ({
  ...minimalHf,
  spec: { ...minimalHf.spec, ...spec },
});

const issuesOf = (doc: unknown) => {
  const result = safeParseServedModel(doc);
  return result.ok ? [] : result.issues;
};

describe('spec.scaling', () => {
  it('fills the windows and keeps replicas as the starting count', () => {
    const model = parseServedModel(withSpec({ scaling: { minReplicas: 2, maxReplicas: 4, targetConcurrency: 6 } }));
    expect(model.spec.scaling).toEqual({
      minReplicas: 2,
      maxReplicas: 4,
      targetConcurrency: 6,
      scaleUpAfter: '15s',
      scaleDownAfter: '5m',
    });
    // replicas keeps its default; the engine starts at minReplicas.
    expect(startingReplicas(model.spec.replicas, model.spec.scaling)).toBe(2);
    // Parsing the parsed model again changes nothing (the workflow parses its input again).
    expect(parseServedModel(model)).toEqual(model);
  });

  it.each([
    [
      { minReplicas: 3, maxReplicas: 2, targetConcurrency: 1 },
      {},
      'spec.scaling.minReplicas',
      'at most maxReplicas (2)',
    ],
    [{ minReplicas: 1, maxReplicas: 2, targetConcurrency: 1 }, { replicas: 3 }, 'spec.replicas', 'leave it out'],
    [{ minReplicas: 0, maxReplicas: 2, targetConcurrency: 1 }, {}, 'spec.scaling.minReplicas', 'use idleToZeroAfter'],
    [
      { minReplicas: 1, maxReplicas: 2, targetConcurrency: 1, idleToZeroAfter: '30m' },
      {},
      'spec.scaling.idleToZeroAfter',
      'needs front (add `front: {}`)',
    ],
    [
      { minReplicas: 1, maxReplicas: 2, targetConcurrency: 1, idleToZeroAfter: '59s' },
      { front: {} },
      'spec.scaling.idleToZeroAfter',
      'must be at least 1m, got "59s"',
    ],
    [
      { minReplicas: 1, maxReplicas: 2, targetConcurrency: 1, idleToZeroAfter: '0s' },
      { front: {} },
      'spec.scaling.idleToZeroAfter',
      'positive duration',
    ],
    [{ minReplicas: 1, maxReplicas: 2 }, {}, 'spec.scaling.targetConcurrency', 'required without slo'],
    [{ minReplicas: 1, maxReplicas: 2, targetConcurrency: 0 }, {}, 'spec.scaling.targetConcurrency', 'above 0'],
    [
      { minReplicas: 1, maxReplicas: 2, targetConcurrency: 1, scaleUpAfter: 'soon' },
      {},
      'spec.scaling.scaleUpAfter',
      'duration',
    ],
    [{ minReplicas: 1, maxReplicas: 2, targetConcurrency: 1, extra: 1 }, {}, 'spec.scaling.extra', ''],
    [
      { minReplicas: 1, maxReplicas: 2, targetConcurrency: 1 },
      { storage: { accessMode: 'ReadWriteOncePod' } },
      'spec.scaling.maxReplicas',
      'ReadWriteOncePod',
    ],
  ])('refuses %j with %j at %s', (scaling, rest, path, words) => {
    const issues = issuesOf(withSpec({ scaling, ...rest }));
    expect(issues.map((i) => i.path)).toContain(path);
    expect(issues.find((i) => i.path === path)?.message).toContain(words);
  });

  it('takes its target from the measured capacity when the spec gives none, with slo', () => {
    const model = parseServedModel(
      withSpec({ scaling: { minReplicas: 1, maxReplicas: 3 }, slo: { ttft: '2s', itl: '100ms' } }),
    );
    expect(scalingPolicy(model.spec.scaling!)).toBeUndefined();
    expect(scalingPolicy(model.spec.scaling!, 10)).toEqual({
      minReplicas: 1,
      maxReplicas: 3,
      targetConcurrency: 8,
      scaleUpAfterMs: 15_000,
      scaleDownAfterMs: 300_000,
    });
  });
});

describe('the count in force and the decisions a workflow takes', () => {
  const model = parseServedModel(withSpec({ scaling: { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 } }));
  const world = (scaledReplicas?: number) => ({ engineApplied: true, ...(scaledReplicas ? { scaledReplicas } : {}) });

  it('starts at the spec, then holds the last decision, within the bounds of the spec now', () => {
    expect(engineReplicas(model, world())).toBe(1);
    expect(engineReplicas(model, world(3))).toBe(3);
    const narrower = parseServedModel(withSpec({ scaling: { minReplicas: 1, maxReplicas: 2, targetConcurrency: 2 } }));
    expect(engineReplicas(narrower, world(3))).toBe(2);
    expect(engineReplicas(parseServedModel(minimalHf), world(3))).toBe(1);
  });

  it('applies a decision made against the count in force, and no other', () => {
    expect(decisionRefusal(model, world(2), { replicas: 3, from: 2, reason: 'load' })).toBeUndefined();
    expect(decisionRefusal(model, world(2), { replicas: 3, from: 1, reason: 'load' })).toContain('made against 1');
    expect(decisionRefusal(model, world(2), { replicas: 5, from: 2, reason: 'load' })).toContain('outside 1..4');
    expect(decisionRefusal(model, world(2), { replicas: 2, from: 2, reason: 'load' })).toContain('already');
    expect(decisionRefusal(parseServedModel(minimalHf), world(), { replicas: 2, from: 1, reason: 'x' })).toContain(
      'no spec.scaling',
    );
  });

  it('goes to zero only with idleToZeroAfter and a front, and not while a schedule window is open', () => {
    const zeroable = parseServedModel(
      withSpec({
        scaling: {
          minReplicas: 1,
          maxReplicas: 4,
          targetConcurrency: 2,
          idleToZeroAfter: '30m',
          schedule: [{ cron: '0 8 * * 1-5', timeZone: 'UTC', minReplicas: 2, for: '10h' }],
        },
        front: {},
      }),
    );
    const toZero = { replicas: 0, from: 2, reason: 'quiet' };
    expect(decisionRefusal(model, world(2), toZero)).toContain('zero needs scaling.idleToZeroAfter');
    expect(decisionRefusal(zeroable, world(2), toZero)).toBeUndefined();
    const atZero = { engineApplied: true, scaledReplicas: 0 };
    expect(engineReplicas(zeroable, atZero)).toBe(0);
    expect(engineScale(initialStatus(zeroable, new Date(0).toISOString()), zeroable, atZero)).toMatchObject({
      replicas: 0,
      scaling: { idleToZeroAfterMs: 1_800_000 },
    });
    // The wake: to the floor or above, made against 0.
    expect(decisionRefusal(zeroable, atZero, { replicas: 1, from: 0, reason: 'held' })).toBeUndefined();
    // A window open: its floor, not zero; no decision to zero, and no idleToZeroAfterMs for the autoscaler.
    const windowOpen = { ...atZero, scheduledMin: 2 };
    expect(engineReplicas(zeroable, windowOpen)).toBe(2);
    expect(decisionRefusal(zeroable, { ...windowOpen, scaledReplicas: 2 }, toZero)).toContain('zero needs');
    const policy = engineScale(initialStatus(zeroable, new Date(0).toISOString()), zeroable, windowOpen).scaling;
    expect(policy).toMatchObject({ minReplicas: 2 });
    expect(policy?.idleToZeroAfterMs).toBeUndefined();
    // A window closed again (its floor back at minReplicas): zero allowed.
    expect(decisionRefusal(zeroable, { ...atZero, scaledReplicas: 2, scheduledMin: 1 }, toZero)).toBeUndefined();
  });
});

describe('the timeline of a busy model', () => {
  it('keeps the last scale entries and every other entry', () => {
    const model = parseServedModel(minimalHf);
    const entry = (step: 'scale' | 'repair', n: number) => ({
      step,
      generation: 1,
      startedAt: new Date(n * 1000).toISOString(),
      endedAt: new Date(n * 1000).toISOString(),
      outcome: 'Succeeded' as const,
      detail: `${step} ${n}`,
    });
    const timeline = Array.from({ length: 50 }, (_, n) => entry(n % 5 === 0 ? 'repair' : 'scale', n));
    const status = { ...initialStatus(model, new Date(0).toISOString()), timeline };
    const kept = withRecentScaleEntries(status).timeline;
    expect(kept.filter((e) => e.step === 'scale')).toEqual(
      timeline.filter((e) => e.step === 'scale').slice(-KEPT_SCALE_ENTRIES),
    );
    expect(kept.filter((e) => e.step === 'repair')).toHaveLength(10);
    const few = { ...status, timeline: timeline.slice(0, 10) };
    expect(withRecentScaleEntries(few)).toBe(few);
  });
});

describe('the Deployment of a scaling model', () => {
  it('carries the policy for the autoscaler, and only when given one', () => {
    const model = parseServedModel(withSpec({ scaling: { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 } }));
    const policy = scalingPolicy(model.spec.scaling!)!;
    const scaled = buildDeployment(model, { rootUid: 'uid', replicas: 3, scaling: policy });
    expect(JSON.parse(scaled.metadata!.annotations![ANNOTATION_SCALING]!)).toEqual(policy);
    expect(scaled.spec!.replicas).toBe(3);
    const plain = buildDeployment(model, { rootUid: 'uid' });
    expect(plain.metadata!.annotations![ANNOTATION_SCALING]).toBeUndefined();
    // The count and the policy are not in the pod template: a decision rolls nothing out.
    expect(scaled.spec!.template).toStrictEqual(plain.spec!.template);
  });

  it('is built, for a dry run, as the first apply makes it: at the starting count, with the policy the spec gives', () => {
    const model = parseServedModel(withSpec({ scaling: { minReplicas: 2, maxReplicas: 4, targetConcurrency: 2 } }));
    const { deployment } = buildAll(model, { rootUid: 'uid' });
    expect(deployment.spec!.replicas).toBe(2);
    expect(deployment.metadata!.annotations![ANNOTATION_SCALING]).toBeDefined();
  });
});

describe("a replica's load from /metrics", () => {
  const render = (running: number, waiting: number) => {
    const load: SchedulerLoad = { running, waiting, kvCacheUsage: 0, lorasInFlight: [], onChange: () => undefined };
    return new EngineMetrics(load).render('qwen');
  };

  it('is running plus waiting, as the engine labels them', () => {
    expect(replicaLoad(render(5, 3))).toBe(8);
    expect(replicaLoad(render(0, 0))).toBe(0);
  });

  it('sums every label set, and is unknown without either gauge', () => {
    const text = 'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_running{engine="1"} 3\n';
    expect(replicaLoad(text)).toBe(5);
    expect(replicaLoad('# HELP other\nother_metric 4\n')).toBeUndefined();
    expect(replicaLoad('<html>not metrics</html>')).toBeUndefined();
  });
});

describe('spec.expiresAt', () => {
  it.each(['2027-01-31T00:00:00Z', '2027-01-31T09:30:00.5+01:00', '2028-02-29T00:00:00Z'])('accepts %s', (at) => {
    expect(parseServedModel(withSpec({ expiresAt: at })).spec.expiresAt).toBe(at);
  });

  it.each([
    ['2027-01-31', 'RFC 3339'],
    ['2027-01-31T00:00:00', 'RFC 3339'],
    ['tomorrow', 'RFC 3339'],
    ['2027-02-30T00:00:00Z', 'a day the month has'],
    ['2027-13-01T00:00:00Z', 'RFC 3339'],
  ])('refuses %s', (at, words) => {
    const issues = issuesOf(withSpec({ expiresAt: at }));
    expect(issues.map((i) => i.path)).toEqual(['spec.expiresAt']);
    expect(issues[0]!.message).toContain(words);
  });

  it('is refused when it has passed, by the client before anything is sent', () => {
    const now = Date.parse('2027-01-31T00:00:00Z');
    expect(expiredProblem('2027-01-30T23:59:59Z', now)).toMatch(/^is in the past/);
    expect(expiredProblem('2027-01-31T00:00:01Z', now)).toBeUndefined();
    expect(expiredProblem(undefined, now)).toBeUndefined();
    expect(() => parseServingDocument(withSpec({ expiresAt: '2001-01-01T00:00:00Z' }))).toThrow(
      /spec\.expiresAt: is in the past/,
    );
    // A document being read for other ends (delete -f, diff) is not refused for it.
    expect(() => parseServedModel(withSpec({ expiresAt: '2001-01-01T00:00:00Z' }))).not.toThrow();
  });
});
