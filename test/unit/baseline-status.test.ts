// The load baseline in status: which spec changes move it (and so measure again), and how people read it.
import { describe, expect, it } from 'vitest';
import {
  describeBaseline,
  parseServedModel,
  type Baseline,
  type BaselineMeasurement,
} from '../../workflows/contract/index.js';
import { baselineKey, baselineOf, baselineSummary } from '../../workflows/status/baseline.js';
import { probesUpTo } from '../support/baseline.js';

type Doc = Record<string, any>;

const doc = (patch?: (d: Doc) => void) => {
  const d: Doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name: 'qwen', namespace: 'models' },
    spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } }, slo: { ttft: '2s', itl: '100ms' } },
  };
  patch?.(d);
  return parseServedModel(d);
};

const measurement: BaselineMeasurement = {
  maxConcurrency: 8,
  capped: false,
  ttftP95Ms: 412,
  itlP95Ms: 21.5,
  attainment: 1,
  pod: 'qwen-7d9c-x',
  probes: probesUpTo(8),
  durationMs: 31_000,
};

describe('baselineKey', () => {
  const base = baselineKey(doc());

  it.each<[string, (d: Doc) => void]>([
    ['labels', (d) => (d.metadata.labels = { team: 'search' })],
    ['replicas', (d) => (d.spec.replicas = 3)],
    ['adapters', (d) => (d.spec.engine = { lora: { enabled: false } })],
    ['the volume size', (d) => (d.spec.storage = { size: '80Gi' })],
    ['the puller deadline', (d) => (d.spec.puller = { deadline: '3h' })],
    ['the startup timeout', (d) => (d.spec.engine = { startupTimeout: '1h' })],
  ])('does not change with %s', (_, patch) => {
    expect(baselineKey(doc(patch))).toBe(base);
  });

  it.each<[string, (d: Doc) => void]>([
    ['engine args', (d) => (d.spec.engine = { args: ['--max-num-seqs=16'] })],
    ['the engine image', (d) => (d.spec.engine = { image: 'vllm/vllm-openai:v0.11.1' })],
    ['engine env', (d) => (d.spec.engine = { env: [{ name: 'VLLM_ATTENTION_BACKEND', value: 'FLASHINFER' }] })],
    ['the weights', (d) => (d.spec.source.huggingface.revision = 'v2')],
    ['resources', (d) => (d.spec.resources = { gpus: 2 })],
    ['the node selector (GPU type)', (d) => (d.spec.scheduling = { nodeSelector: { gpu: 'h100' } })],
    ['the goal', (d) => (d.spec.slo.ttft = '1s')],
    ['the workload', (d) => (d.spec.slo.workload = { outputTokens: 256 })],
    ['LoRA being enabled', (d) => (d.spec.engine = { lora: { enabled: true } })],
  ])('changes with %s', (_, patch) => {
    expect(baselineKey(doc(patch))).not.toBe(base);
  });

  it('is 16 hex digits and the same for the same spec', () => {
    expect(base).toMatch(/^[0-9a-f]{16}$/);
    expect(baselineKey(doc())).toBe(base);
  });
});

describe('the baseline as people read it', () => {
  const baseline: Baseline = baselineOf(measurement, doc(), 3, '2026-12-02T02:00:00.000Z');

  it('records the goal, the shape, the generation and the probes', () => {
    expect(baseline).toEqual({
      maxConcurrency: 8,
      capped: false,
      ttftP95Ms: 412,
      itlP95Ms: 21.5,
      attainment: 1,
      goal: { ttft: '2s', itl: '100ms', attainment: 0.95 },
      shape: { promptTokens: 256, outputTokens: 128 },
      generation: 3,
      key: baselineKey(doc()),
      measuredAt: '2026-12-02T02:00:00.000Z',
      durationMs: 31_000,
      probes: '1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗',
      pod: 'qwen-7d9c-x',
    });
  });

  it('describes a capacity, a capped one and none', () => {
    expect(describeBaseline(baseline)).toBe(
      '8 requests at once per replica meet ttft ≤ 2s and itl ≤ 100ms for 95% (p95 ttft 412 ms, itl 21.5 ms; measured at generation 3)',
    );
    expect(describeBaseline({ ...baseline, capped: true, maxConcurrency: 256 })).toMatch(
      /^at least 256 \(the measurement's ceiling\) requests at once per replica/,
    );
    expect(describeBaseline({ ...baseline, maxConcurrency: 0 })).toBe(
      'no concurrency meets ttft ≤ 2s and itl ≤ 100ms for 95%, not even 1 request at a time (measured at generation 3)',
    );
  });

  it("summarizes the step's outcome for the timeline", () => {
    expect(baselineSummary(measurement)).toBe('8 requests at once (ttft p95 412 ms, itl p95 21.5 ms) on qwen-7d9c-x');
    expect(baselineSummary({ ...measurement, skipped: 'no direct route' })).toBe('not measured: no direct route');
    expect(baselineSummary({ ...measurement, maxConcurrency: 0, firstError: 'HTTP 503: busy' })).toBe(
      'the goal is not met even one request at a time on qwen-7d9c-x; first error: HTTP 503: busy',
    );
  });
});
