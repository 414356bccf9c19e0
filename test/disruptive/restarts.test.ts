// Chaos, part (c), small slice: the local stack's Temporal dev server and then its kube-apiserver restarted in the
// middle of a model's rollout. The `ferry serve --wait` process rides it out (exit 0), the model is Ready with exactly
// its objects, status is never Ready early, and its delete leaves nothing. This restarts shared components, so it runs
// in its own project, after every other test (vitest.config.ts); the full run is `npm run chaos`.
import { describe, expect, it } from 'vitest';
import { bench } from '../support/bench.js';

describe('chaos (c): restarts of the control plane', { timeout: 600_000 }, () => {
  it('a rollout survives a Temporal restart and a kube-apiserver restart', async ({ signal }) => {
    const result = await bench('chaos.ts', ['--parts', 'restarts', '--restart-rounds', '1'], signal);
    const restarts = result.restarts as {
      summary: Record<string, unknown>;
      restarts: { component: string; during: string; downMs: number }[];
    };
    expect(restarts.summary).toMatchObject({
      restarts: 2,
      converged: 2,
      duplicates: 0,
      orphans: 0,
      falseReadySamples: 0,
      spuriousExits: 0,
    });
    expect(restarts.restarts.map((r) => r.component)).toEqual(['temporal', 'kube-apiserver']);
    // Each went down while the model was rolling out, and was away for a while (a restart, not a no-op).
    for (const r of restarts.restarts) {
      expect(r.during).toBe('Starting');
      expect(r.downMs).toBeGreaterThan(500);
    }
  });
});
