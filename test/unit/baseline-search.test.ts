// The concurrency search against fake probes with known thresholds: its answer, its probe order and how many probes
// (each a real load step on an engine) it may spend.
import { describe, expect, it } from 'vitest';
import {
  findMaxConcurrency,
  plannedLoad,
  type ProbeResult,
  type SearchResult,
} from '../../activities/baseline/index.js';

function resultAt(concurrency: number, meets: boolean): ProbeResult {
  return {
    concurrency,
    requests: 3 * concurrency,
    good: meets ? 3 * concurrency : 0,
    errors: 0,
    attainment: meets ? 1 : 0,
    ttftP95Ms: 10,
    itlP95Ms: 1,
    outputTokens: 3 * concurrency,
    meets,
    stoppedEarly: false,
  };
}

/** An engine that meets the goal exactly up to `threshold` clients. */
const passesUpTo = (threshold: number) => async (concurrency: number) =>
  resultAt(concurrency, concurrency <= threshold);

const probed = (search: SearchResult) => search.probes.map((result) => result.concurrency);

/** The bound the search promises: doubling, then bisecting the last doubling's interval. */
const probeBound = (cap: number) => 2 * Math.ceil(Math.log2(cap)) + 1;

const CAPS = [1, 2, 3, 4, 5, 7, 8, 9, 10, 16, 17, 31, 32, 33, 100, 1000];

describe('findMaxConcurrency', () => {
  it('finds the threshold exactly, for every threshold from 0 to past the cap', async () => {
    for (const cap of CAPS) {
      const thresholds = new Set([0, 1, 2, cap - 1, cap, cap + 1, 2 * cap, Math.floor(cap / 2), Math.floor(cap / 3)]);
      if (cap <= 33) for (let k = 0; k <= cap + 1; k += 1) thresholds.add(k);
      for (const k of thresholds) {
        const search = await findMaxConcurrency(passesUpTo(k), { maxConcurrency: cap });
        const expected = Math.min(k, cap);
        expect(search.maxConcurrency, `cap ${cap}, threshold ${k}`).toBe(expected);
        expect(search.capped, `cap ${cap}, threshold ${k}`).toBe(k >= cap);
        expect(search.at?.concurrency).toBe(expected === 0 ? undefined : expected);
        expect(search.probes.length, `cap ${cap}, threshold ${k}`).toBeLessThanOrEqual(probeBound(cap));
        const concurrencies = probed(search);
        expect(new Set(concurrencies).size).toBe(concurrencies.length);
        expect(Math.max(...concurrencies)).toBeLessThanOrEqual(cap);
        expect(Math.min(...concurrencies)).toBeGreaterThanOrEqual(1);
      }
    }
  });

  it('doubles from 1, then bisects between the last pass and the first failure', async () => {
    const search = await findMaxConcurrency(passesUpTo(37), { maxConcurrency: 100 });
    expect(probed(search)).toEqual([1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]);
    expect(search).toMatchObject({ maxConcurrency: 37, capped: false, at: { concurrency: 37, meets: true } });
  });

  it('stops at the cap when the cap passes, and probes it even when it is not a power of two', async () => {
    const search = await findMaxConcurrency(passesUpTo(1000), { maxConcurrency: 12 });
    expect(probed(search)).toEqual([1, 2, 4, 8, 12]);
    expect(search).toMatchObject({ maxConcurrency: 12, capped: true, at: { concurrency: 12 } });
  });

  it('bisects below the cap when the cap fails', async () => {
    const search = await findMaxConcurrency(passesUpTo(11), { maxConcurrency: 12 });
    expect(probed(search)).toEqual([1, 2, 4, 8, 12, 10, 11]);
    expect(search).toMatchObject({ maxConcurrency: 11, capped: false });
  });

  it('answers 0 after a single probe when even one client fails', async () => {
    const search = await findMaxConcurrency(passesUpTo(0), { maxConcurrency: 64 });
    expect(probed(search)).toEqual([1]);
    expect(search).toEqual({ maxConcurrency: 0, at: undefined, probes: [resultAt(1, false)], capped: false });
  });

  it('is deterministic, also for a probe whose answers are not monotone', async () => {
    // Noisy engines pass and fail out of order; the search must still end, on an adjacent pass/fail pair.
    const noisy = async (concurrency: number) => resultAt(concurrency, [1, 2, 3, 5, 6, 9].includes(concurrency));
    const first = await findMaxConcurrency(noisy, { maxConcurrency: 16 });
    const second = await findMaxConcurrency(noisy, { maxConcurrency: 16 });
    expect(probed(second)).toEqual(probed(first));
    expect(probed(first)).toEqual([1, 2, 4, 3]);
    expect(first.maxConcurrency).toBe(3);
  });

  it('reports each probe in order through onProbe, before making the next', async () => {
    const seen: [number, number][] = [];
    const made: number[] = [];
    const search = await findMaxConcurrency(
      async (concurrency) => {
        made.push(concurrency);
        return resultAt(concurrency, concurrency <= 5);
      },
      {
        maxConcurrency: 8,
        onProbe: async (result, index) => {
          expect(made.length).toBe(index + 1);
          seen.push([index, result.concurrency]);
        },
      },
    );
    expect(seen).toEqual(probed(search).map((concurrency, index) => [index, concurrency]));
  });

  it('passes a failing probe or onProbe through', async () => {
    const boom = new Error('cancelled');
    await expect(
      findMaxConcurrency(
        async (c) => {
          if (c === 4) throw boom;
          return resultAt(c, true);
        },
        { maxConcurrency: 8 },
      ),
    ).rejects.toBe(boom);
    await expect(
      findMaxConcurrency(passesUpTo(8), {
        maxConcurrency: 8,
        onProbe: () => {
          throw boom;
        },
      }),
    ).rejects.toBe(boom);
  });

  it('refuses a cap that is not a positive integer', async () => {
    for (const cap of [0, -1, 1.5, Number.NaN, Infinity]) {
      await expect(findMaxConcurrency(passesUpTo(1), { maxConcurrency: cap })).rejects.toThrow(RangeError);
    }
  });
});

describe('plannedLoad', () => {
  const workload = { promptTokens: 100, outputTokens: 20 };

  it('counts the worst case of a small search by hand', () => {
    // Cap 4: 1, 2, 4 then 3 when 4 fails (1 + 2 + 4 + 3 = 10 clients over 4 probes).
    expect(plannedLoad(workload, 4, 3)).toEqual({
      probes: 4,
      requests: 30,
      promptTokens: 3000,
      outputTokens: 600,
    });
    expect(plannedLoad(workload, 1)).toEqual({ probes: 1, requests: 3, promptTokens: 300, outputTokens: 60 });
  });

  it('bounds every search the cap allows, and is reached by one of them', async () => {
    for (let cap = 1; cap <= 40; cap += 1) {
      let mostClients = 0;
      let mostProbes = 0;
      for (let k = 0; k <= cap; k += 1) {
        const search = await findMaxConcurrency(passesUpTo(k), { maxConcurrency: cap });
        mostClients = Math.max(
          mostClients,
          probed(search).reduce((sum, c) => sum + c, 0),
        );
        mostProbes = Math.max(mostProbes, search.probes.length);
      }
      const planned = plannedLoad(workload, cap, 2);
      expect(planned.requests, `cap ${cap}`).toBe(2 * mostClients);
      expect(planned.probes, `cap ${cap}`).toBe(mostProbes);
      expect(planned.probes).toBeLessThanOrEqual(probeBound(cap));
    }
  });

  it('stays quick for a large cap', () => {
    const planned = plannedLoad(workload, 100_000, 3);
    expect(planned.probes).toBeLessThanOrEqual(probeBound(100_000));
    expect(planned.requests).toBeLessThanOrEqual(3 * 100_000 * planned.probes);
  });
});
