// The benchmarks' slices whose checks count rather than time, beside the integration tests (the others run after
// them, alone: test/integration/bench/). Each runs its benchmark's command at its smallest against the local stack:
// the quiet steady state stays quiet (Ready models nothing touches cost the worker no API request and their workflows
// no history event; in full, `npm run bench:steady`), the gate refuses the admin routes, an instant serve reaches a
// serving engine both ways (`npm run bench:serve`), and of two workers a lost Lease holder's share is taken over with
// no wake missed or doubled (`npm run bench:worker-loss`, 100 models). docs/performance.md has the full runs' results.
import { describe, expect, it } from 'vitest';
import { bench } from '../../support/bench.js';

describe('benchmarks that count, small slice', { timeout: 300_000 }, () => {
  it('steady state: three quiet Ready models cost no API request and no history event over 20 s', async () => {
    const args = ['--models', '3', '--window', '20s', '--settle', '10s', '--server-baseline', '5s'];
    const result = await bench('steady-state.ts', args);
    expect(result).toMatchObject({ config: { models: 3, watch: 'on' }, apiRequests: 0, historyEvents: 0 });
    expect(result.workerRssMiB).toBeGreaterThan(0);
    // The server's side, from its metrics: starting a model took at least its start request and wrote its history.
    const server = result.temporalServer as { kind: string; perModelStarted: Record<string, number> };
    expect(server.kind).toMatch(/dev server|PostgreSQL/);
    expect(server.perModelStarted.frontendRequests).toBeGreaterThanOrEqual(1);
    expect(server.perModelStarted.persistenceWrites).toBeGreaterThan(0);
  });

  it("gate: three rounds through the network policy's gate, every admin route refused, every completion whole", async () => {
    const result = await bench('gate.ts', ['--rounds', '3', '--concurrency', '1,4']);
    expect(result.refused).toEqual({ '/v1/load_lora_adapter': 403, '/scale_elastic_ep': 403, '/collective_rpc': 403 });
    const levels = result.levels as { concurrency: number; requestsEach: number; failed: object }[];
    expect(levels.map((l) => [l.concurrency, l.requestsEach, l.failed])).toEqual([
      [1, 3, { direct: 0, gate: 0 }],
      [4, 12, { direct: 0, gate: 0 }],
    ]);
  });

  it('instant serve: ferry and the kubectl script both reach a serving engine, and the ratio is reported', async () => {
    const result = await bench('serve-vs-kubectl.ts', ['--trials', '1']);
    expect(result).toMatchObject({ trials: 1 });
    expect(result.medianRatio).toBeGreaterThan(0);
  });

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
