// Scale to zero's rule (activities/scaling/idle.ts): to zero only after idleToZeroAfter with no request taken or held,
// from zero at once when one is held; examples, then properties over random reading sequences.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { idleVerdict, type FrontSample, type IdleMemory } from '../../activities/scaling/idle.js';

const IDLE = 30 * 60_000;
const at = (minutes: number, requests: number, inFlight = 0): FrontSample => ({
  at: minutes * 60_000,
  requests,
  inFlight,
});

/** Feeds `samples` to the rule with the count it sets kept in force; returns each verdict. */
function run(samples: FrontSample[], current = 1, wakeTo = 1) {
  let memory: IdleMemory = {};
  return samples.map((sample) => {
    const verdict = idleVerdict(IDLE, memory, sample, current, wakeTo);
    memory = verdict.memory;
    if (verdict.replicas !== undefined) current = verdict.replicas;
    return { ...verdict, current };
  });
}

describe('the idle rule', () => {
  it('goes to zero after idleToZeroAfter with nothing taken and nothing held, counted from the last request', () => {
    const verdicts = run([at(0, 5), at(10, 6), at(39, 6), at(40, 6)]);
    expect(verdicts.map((v) => v.replicas)).toEqual([undefined, undefined, undefined, 0]);
    expect(verdicts[3]!.reason).toBe('no request for 30m 00s (idleToZeroAfter 30m 00s)');
  });

  it('starts the clock at its first reading: a worker that has just started has not seen the quiet', () => {
    const verdicts = run([at(100, 5), at(129, 5), at(130, 5)]);
    expect(verdicts.map((v) => v.replicas)).toEqual([undefined, undefined, 0]);
  });

  it('never goes to zero while a request is in the front, however long it runs; the clock starts when it ends', () => {
    const verdicts = run([at(0, 5, 1), at(31, 5, 1), at(61, 5, 1), at(90, 5, 0), at(91, 5, 0)]);
    expect(verdicts.map((v) => v.replicas)).toEqual([undefined, undefined, undefined, undefined, 0]);
  });

  it('counts a front pod that restarted (its count fell) as activity', () => {
    const verdicts = run([at(0, 50), at(29, 50), at(31, 2), at(60, 2), at(61, 2)]);
    expect(verdicts.map((v) => v.replicas)).toEqual([undefined, undefined, undefined, undefined, 0]);
  });

  it('wakes at once from zero to its floor when a request is held, and stays at zero for one that came and went', () => {
    let verdict = idleVerdict(IDLE, { requests: 5, busyAt: 0 }, at(40, 6), 0, 2);
    expect(verdict.replicas).toBeUndefined();
    expect(verdict.reason).toBe('a request came and went at zero');
    verdict = idleVerdict(IDLE, verdict.memory, at(41, 7, 3), 0, 2);
    expect(verdict).toMatchObject({ replicas: 2, reason: '3 requests held at zero: 0 → 2 at once' });
    expect(idleVerdict(IDLE, {}, at(41, 0, 1), 0, 0)).toMatchObject({ replicas: 1 });
  });

  it('properties: zero only after a full quiet idleToZeroAfter; a held request at zero always wakes', () => {
    const readings = fc.array(
      fc.record({ gap: fc.integer({ min: 1, max: 20 * 60_000 }), taken: fc.nat(3), inFlight: fc.nat(2) }),
      { maxLength: 60 },
    );
    fc.assert(
      fc.property(readings, fc.integer({ min: 1, max: 4 }), (steps, wakeTo) => {
        let [t, requests, current] = [0, 0, 1];
        let memory: IdleMemory = {};
        let lastBusy: number | undefined;
        for (const step of steps) {
          t += step.gap;
          requests += step.taken;
          const sample = { at: t, requests, inFlight: step.inFlight };
          const busy = step.inFlight > 0 || (lastBusy !== undefined && step.taken > 0);
          if (busy || lastBusy === undefined) lastBusy = t;
          const verdict = idleVerdict(IDLE, memory, sample, current, wakeTo);
          memory = verdict.memory;
          if (verdict.replicas === 0) {
            expect(current).toBeGreaterThan(0);
            expect(step.inFlight).toBe(0);
            expect(t - lastBusy).toBeGreaterThanOrEqual(IDLE);
          }
          if (current === 0 && step.inFlight > 0) expect(verdict.replicas).toBe(Math.max(1, wakeTo));
          if (current > 0 && verdict.replicas !== undefined) expect(verdict.replicas).toBe(0);
          if (verdict.replicas !== undefined) current = verdict.replicas;
        }
      }),
      { numRuns: 500 },
    );
  });
});
