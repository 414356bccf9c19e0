// A lost worker, end to end, by the benchmark at its smallest (`npm run bench:worker-loss` runs 100 models; results in
// docs/performance.md): two real worker processes share the watch's wakes by the namespace's Lease, the holder is
// SIGKILLed while every model's Service is deleted, and the other takes over and repairs each model once. Here, not
// with the other benchmarks' slices: what it checks is counted, not timed, but for a bound with room to spare.
import { describe, expect, it } from 'vitest';
import { bench } from '../../support/bench.js';

describe('a lost worker of two', { timeout: 300_000 }, () => {
  it("worker loss: of two workers, the Lease's holder killed while every model changes; the other takes over, none missed, none doubled", async () => {
    const result = await bench('worker-loss.ts', ['--models', '3', '--deadline', '1m']);
    const rounds = result.rounds as { round: string; takeoverS?: number; allBackS?: number; missed: string[] }[];
    expect(rounds.map((r) => r.round)).toEqual(['both workers', 'holder killed']);
    expect(result).toMatchObject({ models: 3, missed: 0, doubled: 0 });
    // The Lease's 10 s and a renewal seen at most one round (4.4 s) late; the machine's load adds a little.
    expect(rounds[1]!.takeoverS).toBeLessThanOrEqual(20);
    expect(rounds[1]!.allBackS).toBeGreaterThanOrEqual(rounds[1]!.takeoverS!);
  });
});
