import { defineConfig } from 'vitest/config';
import LongestFirst from './test/support/sequencer.js';

// Unit tests need nothing running. Integration tests need the local stack (`npm run local:up`):
// a real Temporal dev server and a real Kubernetes control plane; they read `.ferry/local.env`.
export default defineConfig({
  test: {
    pool: 'forks',
    // Most integration tests wait on controllers and timers, not the CPU: overlap them even on 2 cores.
    maxWorkers: 4,
    reporters: ['default', './test/support/summary-reporter.ts'],
    // The longest files of the first group start first, so none of them is left to run alone at its end.
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: ['test/integration/bench/**'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 0 },
        },
      },
      // The benchmarks' small slices kill workers, inject faults and time reactions: after the other integration
      // tests, so three other test files do not compete with them for the two cores (twice, under that load, a
      // killed delete did not converge in CI; the harness now bounds and explains such a trial).
      {
        extends: true,
        test: {
          name: 'bench',
          include: ['test/integration/bench/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 1 },
        },
      },
      // The real engine (`npm run local:up -- --engine vllm`): real vLLM processes in pods of the node agent, 2–4 GiB
      // and a core each, so after the other suites, alone; skipped, with the reason, on a stack with the stand-in only.
      {
        extends: true,
        test: {
          name: 'real-engine',
          include: ['test/real-engine/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 600_000,
          hookTimeout: 300_000,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
      // The upgrade test (`npm run test:upgrade`): the previous release's worker process, then this checkout's, each
      // serving three models; after the real engine, before the tests that restart the stack. Alone: beside the
      // integration tests it took twice as long, and a download meant to outlast the upgrade did not.
      {
        extends: true,
        test: {
          name: 'upgrade',
          include: ['test/upgrade/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 900_000,
          hookTimeout: 300_000,
          fileParallelism: false,
          sequence: { groupOrder: 3 },
        },
      },
      // Tests that restart parts of the shared local stack (Temporal, the API server): after all the others, alone.
      {
        extends: true,
        test: {
          name: 'disruptive',
          include: ['test/disruptive/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 600_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 4 },
        },
      },
    ],
  },
});
