// Load baselines for tests: a measurement's probes and a status' baseline, as the workflow would record them.
import type { Baseline, BaselineProbe } from '../../workflows/contract/index.js';

/** The probes of a search that found `capacity`: three requests per client, all good up to it, none above. */
export function probesUpTo(capacity: number, tried = [1, 2, 4, 8, 16, 12, 10, 9]): BaselineProbe[] {
  return tried.map((concurrency) => ({
    concurrency,
    requests: concurrency * 3,
    good: concurrency <= capacity ? concurrency * 3 : 0,
    errors: 0,
    meets: concurrency <= capacity,
  }));
}

/** A status' baseline of 8 requests at once within ttft 2s and itl 100ms, with `patch` over it. */
export function sampleBaseline(patch: Partial<Baseline> = {}): Baseline {
  return {
    maxConcurrency: 8,
    capped: false,
    ttftP95Ms: 412,
    itlP95Ms: 21,
    attainment: 1,
    goal: { ttft: '2s', itl: '100ms', attainment: 0.95 },
    shape: { promptTokens: 256, outputTokens: 128 },
    generation: 2,
    key: '0123456789abcdef',
    measuredAt: '2026-01-01T12:05:00Z',
    durationMs: 31_000,
    probes: '1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗',
    ...patch,
  };
}
