// The autoscaler's pure rule (activities/scaling/rule.ts): examples of its windows, steps and bounds, then properties
// over generated policies and load sequences, each decision checked against the rule recomputed from every reading
// so far (no memory, no thinning), the memory's size, and convergence under a constant load.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide, EMPTY_MEMORY, recommend, type Decision, type ScalerMemory } from '../../activities/scaling/rule.js';
import type { ScalingPolicy } from '../../workflows/contract/index.js';

const POLICY: ScalingPolicy = {
  minReplicas: 1,
  maxReplicas: 10,
  targetConcurrency: 6,
  scaleUpAfterMs: 15_000,
  scaleDownAfterMs: 300_000,
};
const AT_ONCE: ScalingPolicy = {
  ...POLICY,
  maxReplicas: 50,
  targetConcurrency: 1,
  scaleUpAfterMs: 0,
  scaleDownAfterMs: 0,
};

type Reading = readonly [at: number, load: number];

/** Readings of one load every `step` ms from `from` up to `to`, both included. */
function every(step: number, from: number, to: number, load: number): Reading[] {
  const readings: Reading[] = [];
  for (let at = from; at <= to; at += step) readings.push([at, load]);
  return readings;
}

/** Feeds the readings in order, applying each change as the new current count. */
function play(policy: ScalingPolicy, readings: readonly Reading[], current: number, memory = EMPTY_MEMORY) {
  const changes: { at: number; from: number; to: number }[] = [];
  const decisions = new Map<number, Decision>();
  for (const [at, load] of readings) {
    const decision = decide(policy, memory, { at, load }, current);
    decisions.set(at, decision);
    memory = decision.memory;
    if (decision.replicas !== undefined) {
      changes.push({ at, from: current, to: decision.replicas });
      current = decision.replicas;
    }
  }
  return { changes, decisions, memory, current };
}

describe('recommend', () => {
  it('is ⌈load ÷ target⌉ within min..max', () => {
    expect(recommend(POLICY, 18)).toBe(3);
    expect(recommend(POLICY, 19)).toBe(4);
    expect(recommend(POLICY, 0)).toBe(1);
    expect(recommend({ ...POLICY, minReplicas: 0 }, 0)).toBe(0);
    expect(recommend(POLICY, 1000)).toBe(10);
    expect(recommend({ ...POLICY, targetConcurrency: 0.1 }, 0.7)).toBe(7);
    expect(recommend({ ...POLICY, maxReplicas: 20, targetConcurrency: 0.1 }, 1.1)).toBe(11);
  });

  it('agrees with the plain formula on whole numbers', () => {
    fc.assert(
      fc.property(fc.nat(1000), fc.integer({ min: 1, max: 50 }), fc.nat(5), fc.nat(40), (load, target, min, span) => {
        const policy = { ...POLICY, minReplicas: min, maxReplicas: Math.max(1, min + span), targetConcurrency: target };
        const plain = Math.ceil(load / target);
        expect(recommend(policy, load)).toBe(Math.min(policy.maxReplicas, Math.max(min, plain)));
      }),
    );
  });
});

describe('decide', () => {
  it('scales up once the load has called for more for exactly scaleUpAfter, not one reading before', () => {
    const run = play(POLICY, [...every(1000, -30_000, -1000, 6), ...every(1000, 0, 20_000, 18)], 1);
    expect(run.changes).toEqual([{ at: 15_000, from: 1, to: 3 }]);
    expect(run.decisions.get(14_000)?.reason).toBe('load 18 over target 6 calls for 3 but for 14s of 15s');
    expect(run.decisions.get(15_000)?.reason).toBe('load 18 over target 6 has called for 3 or more for 15s: 1 → 3');
  });

  it('does nothing for a spike shorter than the up window, or a dip shorter than the down window', () => {
    const spike = [...every(1000, 0, 9000, 60), ...every(1000, 10_000, 60_000, 6)];
    expect(play(POLICY, spike, 1).changes).toEqual([]);
    const dip = [...every(5000, 0, 100_000, 18), ...every(5000, 105_000, 300_000, 0), ...every(5000, 305_000, 9e5, 18)];
    expect(play(POLICY, dip, 3).changes).toEqual([]);
  });

  it('scales down once the load has called for fewer for scaleDownAfter', () => {
    const run = play(POLICY, [...every(5000, -10_000, -5000, 18), ...every(5000, 0, 400_000, 6)], 3);
    expect(run.changes).toEqual([
      { at: 300_000, from: 3, to: 2 },
      { at: 305_000, from: 2, to: 1 },
    ]);
    expect(run.decisions.get(295_000)?.reason).toBe('load 6 over target 6 calls for 1 but for 295s of 5m');
  });

  it('moves in bounded steps: at most doubling or adding 4 up, at most halving down', () => {
    const up = play(AT_ONCE, every(1, 0, 5, 20), 1);
    expect(up.changes.map((c) => c.to)).toEqual([5, 10, 20]);
    expect(up.decisions.get(0)?.reason).toContain('(20 wanted; one step at most doubles or adds 4)');
    const down = play(AT_ONCE, every(1, 0, 5, 1), 16);
    expect(down.changes.map((c) => c.to)).toEqual([8, 4, 2, 1]);
  });

  it('clamps into min..max', () => {
    expect(play(POLICY, every(1000, 0, 40_000, 1000), 3).current).toBe(10);
    expect(play(AT_ONCE, every(1, 0, 5, 1000), 40).changes).toEqual([{ at: 0, from: 40, to: 50 }]);
    const floor = { ...AT_ONCE, minReplicas: 3 };
    expect(play(floor, every(1, 0, 5, 0), 16).changes.map((c) => c.to)).toEqual([8, 4, 3]);
  });

  it('brings a count outside min..max inside at once, with no window', () => {
    const over = decide(POLICY, EMPTY_MEMORY, { at: 0, load: 60 }, 12);
    expect(over.replicas).toBe(10);
    expect(over.reason).toBe("12 replicas is outside the policy's 1..10: 12 → 10");
    expect(decide({ ...POLICY, minReplicas: 2 }, EMPTY_MEMORY, { at: 0, load: 0 }, 0).replicas).toBe(2);
  });

  it('takes a load of 0 to minReplicas after the down window, down to 0', () => {
    const zero = { ...POLICY, minReplicas: 0 };
    const run = play(zero, [...every(1000, -5000, -1000, 18), ...every(1000, 0, 310_000, 0)], 3);
    expect(run.changes).toEqual([
      { at: 300_000, from: 3, to: 2 },
      { at: 301_000, from: 2, to: 1 },
      { at: 302_000, from: 1, to: 0 },
    ]);
    expect(play({ ...POLICY, minReplicas: 2 }, every(1000, 0, 310_000, 0), 5).current).toBe(2);
  });

  it('ignores a reading older than the last one, or at the same time', () => {
    const { memory } = play(POLICY, every(1000, 0, 10_000, 18), 1);
    for (const at of [5000, 10_000]) {
      const late = decide(POLICY, memory, { at, load: 60 }, 1);
      expect(late.memory).toBe(memory);
      expect(late.replicas).toBeUndefined();
      expect(late.reason).toBe(`reading at ${at} is not after the last one (10000): ignored`);
    }
  });

  it('scales down a count larger than the ready pods (unschedulable replicas)', () => {
    // spec.replicas is 4 but one pod is ready: its load is all there is, and it calls for 1.
    const run = play(POLICY, every(5000, 0, 320_000, 3), 4);
    expect(run.changes).toEqual([
      { at: 300_000, from: 4, to: 2 },
      { at: 305_000, from: 2, to: 1 },
    ]);
  });

  it('keeps a memory that survives JSON', () => {
    const readings = [...every(700, 0, 20_000, 13), ...every(700, 20_300, 40_000, 40)];
    const direct = play(POLICY, readings, 2);
    let memory: ScalerMemory = EMPTY_MEMORY;
    let current = 2;
    for (const [at, load] of readings) {
      const decision = decide(POLICY, memory, { at, load }, current);
      expect(decision).toEqual(direct.decisions.get(at));
      memory = JSON.parse(JSON.stringify(decision.memory)) as ScalerMemory;
      current = decision.replicas ?? current;
    }
  });

  it('keeps at most maxReplicas - minReplicas + 2 entries, even for readings that are each a new extreme', () => {
    const policy = { ...POLICY, maxReplicas: 200, targetConcurrency: 1, scaleDownAfterMs: 300_000 };
    // 1, 200, 2, 199, 3, 198, …: every reading is lower or higher than all later ones.
    const loads = Array.from({ length: 200 }, (_, i) => (i % 2 ? 200 - (i - 1) / 2 : 1 + i / 2));
    const run = play(policy, [...loads.map((load, i): Reading => [i * 100, load])], 100);
    expect(run.memory.recommendations.length).toBeLessThanOrEqual(201);
    expect(run.memory.recommendations.length).toBeGreaterThan(150);
    // A steady load every 100 ms for the whole 5-minute window keeps next to nothing.
    expect(play(policy, every(100, 0, 600_000, 17), 17).memory.recommendations.length).toBeLessThanOrEqual(2);
  });
});

// Properties. Loads come in runs (a level held for a number of readings) so that windows fill and scalings happen.
const policyArb = fc
  .record({
    minReplicas: fc.nat(4),
    span: fc.nat(30),
    targetConcurrency: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.double({ min: 0.25, max: 10, noNaN: true })),
    scaleUpAfterMs: fc.oneof(fc.constant(0), fc.nat(20_000)),
    scaleDownAfterMs: fc.oneof(fc.constant(0), fc.nat(60_000)),
  })
  .map(({ span, ...p }): ScalingPolicy => ({ ...p, maxReplicas: Math.max(1, p.minReplicas + span) }));
const runsArb = fc.array(fc.record({ load: fc.nat(300), readings: fc.integer({ min: 1, max: 40 }) }), {
  minLength: 1,
  maxLength: 25,
});
const stepsArb = fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 50 });

/** The loads of `runs` at readings spaced by the steps (cycled). */
function readingsOf(runs: readonly { load: number; readings: number }[], steps: readonly number[], from = 0) {
  const readings: Reading[] = [];
  let at = from;
  for (const { load, readings: n } of runs) {
    for (let i = 0; i < n; i++) {
      readings.push([at, load]);
      at += steps[readings.length % steps.length]!;
    }
  }
  return readings;
}

/** What the decision after reading `k` must be, recomputed from all the readings so far. */
function expected(policy: ScalingPolicy, raw: readonly { at: number; r: number }[], current: number) {
  const { minReplicas: min, maxReplicas: max } = policy;
  if (current < min || current > max) return Math.min(max, Math.max(min, current));
  const now = raw.at(-1)!;
  if (now.r === current) return undefined;
  const up = now.r > current;
  const start = now.at - (up ? policy.scaleUpAfterMs : policy.scaleDownAfterMs);
  // The readings in force at some time in [start, now]: from the last one at or before start (none: not covered).
  let first = raw.length - 1;
  while (first >= 0 && raw[first]!.at > start) first--;
  if (first < 0) return undefined;
  const window = raw.slice(first).map((x) => x.r);
  if (up) {
    if (!window.every((r) => r > current)) return undefined;
    return Math.min(Math.min(...window), current + Math.max(current, 4), max);
  }
  if (!window.every((r) => r < current)) return undefined;
  return Math.max(Math.max(...window), Math.min(Math.ceil(current / 2), current - 1), min);
}

describe('decide, over generated policies and loads', () => {
  it('decides what the readings call for: within min..max, never the current count, only after a held window', () => {
    let scalings = 0;
    fc.assert(
      fc.property(
        policyArb,
        runsArb,
        stepsArb,
        fc.nat(40),
        fc.array(fc.option(fc.nat(40), { freq: 8 }), { minLength: 1, maxLength: 30 }),
        (policy, runs, steps, start, overrides) => {
          const raw: { at: number; r: number }[] = [];
          let memory = EMPTY_MEMORY;
          let current = start;
          for (const [k, [at, load]] of readingsOf(runs, steps).entries()) {
            raw.push({ at, r: recommend(policy, load) });
            const decision = decide(policy, memory, { at, load }, current);
            const inRange = current >= policy.minReplicas && current <= policy.maxReplicas;
            expect(decision.replicas).toBe(expected(policy, raw, current));
            if (decision.replicas !== undefined) {
              expect(decision.replicas).not.toBe(current);
              expect(decision.replicas).toBeGreaterThanOrEqual(policy.minReplicas);
              expect(decision.replicas).toBeLessThanOrEqual(policy.maxReplicas);
              // Stated directly: every recommendation of the last scaleUpAfter (scaleDownAfter) was above (below).
              const up = decision.replicas > current;
              const since = at - (up ? policy.scaleUpAfterMs : policy.scaleDownAfterMs);
              const recent = raw.filter((x) => x.at >= since).map((x) => x.r);
              if (inRange) expect(recent.every((r) => (up ? r > current : r < current))).toBe(true);
              if (inRange) scalings++;
              current = decision.replicas;
            }
            expect(decision.memory.recommendations.length).toBeLessThanOrEqual(
              policy.maxReplicas - policy.minReplicas + 2,
            );
            memory = decision.memory;
            current = overrides[k % overrides.length] ?? current;
          }
        },
      ),
      { numRuns: 150 },
    );
    expect(scalings).toBeGreaterThan(50);
    // Each reading is checked against the rule recomputed from every reading before it: seconds on a busy machine.
  }, 30_000);

  it('keeps the memory bounded: 5,000 readings 10 ms apart with a 5-minute window', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 500 }),
        fc.array(fc.nat(600), { minLength: 5000, maxLength: 5000 }),
        (maxReplicas, loads) => {
          const policy = { ...POLICY, minReplicas: 0, maxReplicas, targetConcurrency: 1, scaleDownAfterMs: 300_000 };
          let memory = EMPTY_MEMORY;
          let current = 1;
          let longest = 0;
          for (const [i, load] of loads.entries()) {
            const decision = decide(policy, memory, { at: i * 10, load }, current);
            memory = decision.memory;
            current = decision.replicas ?? current;
            longest = Math.max(longest, memory.recommendations.length);
          }
          expect(longest).toBeLessThanOrEqual(600);
        },
      ),
      // Shrinking 5,000 readings would take minutes: report the first failure as found.
      { numRuns: 10, endOnFailure: true },
    );
  });

  it('converges to recommend(L) under a constant load L, monotonically, in a bounded number of decisions', () => {
    fc.assert(
      fc.property(
        policyArb,
        runsArb,
        stepsArb,
        fc.nat(40),
        fc.integer({ min: 100, max: 3000 }),
        fc.nat(300),
        (policy, runs, steps, start, step, load) => {
          const prefix = readingsOf(runs, steps);
          const before = play(policy, prefix, start);
          const from = prefix.at(-1)![0] + step;
          const window = Math.max(policy.scaleUpAfterMs, policy.scaleDownAfterMs);
          const held = every(step, from, from + window + 40 * step, load);
          const after = play(policy, held, before.current, before.memory);
          const target = recommend(policy, load);
          expect(after.current).toBe(target);
          // Once the load has been held for the longer window, every step is a full one: halving or doubling (+4).
          const full = after.changes.filter((c) => c.at >= from + window);
          expect(full.length).toBeLessThanOrEqual(2 + Math.ceil(Math.log2(policy.maxReplicas + 1)));
          // Before that, the older readings still in a window may make the steps shorter, never past the target.
          for (const { from: was, to } of after.changes) {
            expect(Math.abs(target - to)).toBeLessThan(Math.abs(target - was));
            expect(Math.sign(target - to)).not.toBe(-Math.sign(target - was));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
