// The benchmarks' small slice, run with the suite: each benchmark's command works against the local stack, and the
// quiet steady state stays quiet — Ready models that nothing touches cost the worker no API request and their
// workflows no history event (the full runs, 300 models over 31 minutes, are `npm run bench:steady` and
// `npm run bench:reactions`, `npm run bench:serve`; docs/performance.md has their results).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../support/local-env.js';

async function bench(script: string, args: string[]): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'bench', script), ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`bench/${script} exited ${code}:\n${stderr.slice(-4000)}`);
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('benchmarks, small slice', { timeout: 300_000 }, () => {
  it('steady state: three quiet Ready models cost no API request and no history event over 20 s', async () => {
    const result = await bench('steady-state.ts', ['--models', '3', '--window', '20s', '--settle', '10s']);
    expect(result).toMatchObject({ config: { models: 3, watch: 'on' }, apiRequests: 0, historyEvents: 0 });
    expect(result.workerRssMiB).toBeGreaterThan(0);
  });

  it('reactions: two models, one trial of each, every reaction seen', async () => {
    // Two models: the second is deleted by a `ferry delete` process, the first from the library.
    const result = await bench('reactions.ts', ['--trials', '1', '--models', '2', '--pvc-trials', '1']);
    const summary = result.summary as Record<string, { n: number; p50Ms: number }>;
    expect(Object.keys(summary)).toEqual([
      'serve → Ready (instant simulated stages)',
      'pod deleted → Degraded',
      'engine crash-looping → Degraded',
      'Service deleted → re-created',
      'Deployment deleted → re-created',
      'update call → Deployment patched',
      'ferry update (process start) → Deployment patched',
      'PVC deleted → not Ready (Degraded, then rebuilding)',
      'PVC deleted → Ready again on a new volume',
      'delete call → Deployment deleted',
      'ferry delete (process start) → Deployment deleted',
    ]);
    for (const [name, s] of Object.entries(summary)) expect(s.n, name).toBe(name.startsWith('serve') ? 2 : 1);
  });

  // The update's kill is left to the full run: killed before the update is sent, on a loaded machine, it once lost the
  // update (the CLI exited 1); docs/resilience.md.
  it('chaos: a serve and a delete, each with the worker SIGKILLed in it, converge with nothing extra', async () => {
    const result = await bench('chaos.ts', ['--kills', '2', '--baseline', '1', '--kinds', 'serve,delete']);
    expect(result.summary).toMatchObject({
      trials: 2,
      converged: 2,
      duplicates: 0,
      orphans: 0,
      falseReadySamples: 0,
      spuriousExits: 0,
    });
    const trials = result.trials as { kind: string; killAtMs: number }[];
    expect(trials.map((t) => t.kind)).toEqual(['serve', 'delete']);
    expect(trials.every((t) => t.killAtMs >= 0)).toBe(true);
  });

  it('instant serve: ferry and the kubectl script both reach a serving engine, and the ratio is reported', async () => {
    const result = await bench('serve-vs-kubectl.ts', ['--trials', '1']);
    expect(result).toMatchObject({ trials: 1 });
    expect(result.medianRatio).toBeGreaterThan(0);
  });
});
