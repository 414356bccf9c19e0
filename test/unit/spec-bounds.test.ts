// The parser's bounds and the image reference grammar, as properties over generated values: every whole number past
// 32 bits, every duration past 3650 days, every quantity past 2^53 - 1 and every image with a character outside the
// grammar is refused with the field's path before anything exists; the values inside are accepted; and a replay of a
// spec accepted before these rules (asAcceptedBefore) accepts it again.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asAcceptedBefore, safeParseServedModel } from '../../workflows/contract/index.js';
import { INT32_MAX, MAX_DURATION_DAYS, MAX_QUANTITY } from '../../workflows/contract/spec/rules.js';
import { imageProblem } from '../../workflows/contract/spec/image-ref.js';

type Spec = Record<string, any>;
const doc = (patch: (spec: Spec) => void) => {
  const d = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name: 'qwen', namespace: 'models' },
    spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } } } as Spec,
  };
  patch(d.spec);
  return d;
};
const issuesOf = (d: unknown) => {
  const parsed = safeParseServedModel(d);
  return parsed.ok ? [] : parsed.issues;
};

const WHOLE_FIELDS: [string, (spec: Spec, n: number) => void][] = [
  ['spec.replicas', (s, n) => (s.replicas = n)],
  ['spec.resources.gpus', (s, n) => (s.resources = { gpus: n })],
  ['spec.puller.backoffLimit', (s, n) => (s.puller = { backoffLimit: n })],
  ['spec.engine.lora.maxLoras', (s, n) => (s.engine = { lora: { enabled: true, maxLoras: n } })],
  ['spec.slo.workload.promptTokens', (s, n) => (s.slo = { ttft: '1s', itl: '50ms', workload: { promptTokens: n } })],
];

const DURATION_FIELDS: [string, (spec: Spec, d: string) => void][] = [
  ['spec.puller.deadline', (s, d) => (s.puller = { deadline: d })],
  ['spec.engine.startupTimeout', (s, d) => (s.engine = { startupTimeout: d })],
  ['spec.slo.ttft', (s, d) => (s.slo = { ttft: d, itl: '50ms' })],
];

const QUANTITY_FIELDS: [string, (spec: Spec, q: string) => void][] = [
  ['spec.resources.cpu', (s, q) => (s.resources = { cpu: q })],
  ['spec.resources.memory', (s, q) => (s.resources = { memory: q, shmSize: '1' })],
  ['spec.storage.size', (s, q) => (s.storage = { size: q })],
];

describe('whole numbers', () => {
  it.each(WHOLE_FIELDS)('%s: refused past 32 bits, naming the field and the limit', (path, set) => {
    fc.assert(
      fc.property(fc.integer({ min: INT32_MAX + 1, max: Number.MAX_SAFE_INTEGER }), (n) => {
        const issues = issuesOf(doc((s) => set(s, n)));
        expect(issues).toContainEqual({
          path,
          message: `must be at most ${INT32_MAX} (Kubernetes and vLLM keep it as a 32-bit integer), got ${n}`,
        });
      }),
      { numRuns: 50 },
    );
  });

  it('accepts every replica count up to 2^31 - 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: INT32_MAX }), (n) => {
        expect(issuesOf(doc((s) => (s.replicas = n)))).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});

describe('durations', () => {
  const beyond = fc.oneof(
    fc.integer({ min: MAX_DURATION_DAYS + 1, max: 10_000_000 }).map((d) => `${d}d`),
    fc.integer({ min: MAX_DURATION_DAYS * 24 + 1, max: 2 ** 40 }).map((h) => `${h}h`),
    fc.bigInt({ min: 10n ** 12n, max: 10n ** 30n }).map((s) => `${s}s`),
  );
  it.each(DURATION_FIELDS)('%s: refused past 3650 days, naming the field', (path, set) => {
    fc.assert(
      fc.property(beyond, (d) => {
        const issues = issuesOf(doc((s) => set(s, d)));
        expect(issues).toContainEqual({ path, message: expect.stringMatching(/^must be at most 3650d, got /) });
      }),
      { numRuns: 50 },
    );
  });

  it('accepts every whole number of days up to 3650 as a deadline', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_DURATION_DAYS }), (d) => {
        expect(issuesOf(doc((s) => (s.puller = { deadline: `${d}d` })))).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});

describe('quantities', () => {
  // Exponents and suffixes that take a quantity past 2^53 - 1, up to and past what a double holds (1e400: Infinity).
  const beyond = fc.oneof(
    fc.integer({ min: 16, max: 400 }).map((e) => `1e${e}`),
    fc.integer({ min: 8193, max: 1_000_000 }).map((n) => `${n}Pi`),
    fc.integer({ min: 9, max: 100_000 }).map((n) => `${n}E`),
  );
  it.each(QUANTITY_FIELDS)('%s: refused past 2^53 - 1, naming the field', (path, set) => {
    fc.assert(
      fc.property(beyond, (q) => {
        const issues = issuesOf(doc((s) => set(s, q)));
        expect(issues).toContainEqual({
          path,
          message: expect.stringMatching(new RegExp(`^must be at most ${MAX_QUANTITY} \\(2\\^53 - 1\\) in its unit`)),
        });
      }),
      { numRuns: 50 },
    );
  });
});

describe('image references', () => {
  const lower = fc.stringMatching(/^[a-z0-9]{1,8}$/);
  const component = fc
    .tuple(lower, fc.constantFrom('', '.', '_', '__', '-', '--'), lower)
    .map(([a, sep, b]) => (sep ? `${a}${sep}${b}` : a));
  const registry = fc.oneof(
    fc.constant(''),
    fc.constantFrom('registry.example.com/', 'localhost:5000/', 'ghcr.io/', '10.0.0.1:443/', 'Registry.Example.com/'),
  );
  const tag = fc.oneof(
    fc.constant(''),
    fc.stringMatching(/^\w[\w.-]{0,20}$/).map((t) => `:${t}`),
  );
  const digest = fc.oneof(
    fc.constant(''),
    fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `@sha256:${h}`),
  );
  const valid = fc
    .tuple(registry, fc.array(component, { minLength: 1, maxLength: 3 }), tag, digest)
    .map(([r, path, t, d]) => `${r}${path.join('/')}${t}${d}`);

  it('accepts every reference the grammar makes', () => {
    fc.assert(
      fc.property(valid, (image) => {
        expect(imageProblem(image)).toBeUndefined();
        expect(issuesOf(doc((s) => (s.engine = { image })))).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a reference with any character outside the grammar, in the engine and the puller alike', () => {
    const outside = fc.oneof(
      fc.constantFrom(
        'ö',
        'é',
        '中',
        'Ω',
        '\u00a0',
        '!',
        '$',
        '%',
        '&',
        '*',
        '(',
        ')',
        ',',
        ';',
        '<',
        '>',
        '?',
        '|',
        '~',
        '`',
      ),
      fc
        .integer({ min: 0x80, max: 0xffff })
        .filter((c) => c < 0xd800 || c > 0xdfff)
        .map((c) => String.fromCharCode(c)),
    );
    fc.assert(
      fc.property(valid, outside, fc.nat(), (image, bad, at) => {
        const i = at % (image.length + 1);
        const broken = `${image.slice(0, i)}${bad}${image.slice(i)}`;
        expect(imageProblem(broken)).toBeDefined();
        const engine = issuesOf(doc((s) => (s.engine = { image: broken })));
        expect(engine.some((issue) => issue.path === 'spec.engine.image')).toBe(true);
        const puller = issuesOf(doc((s) => (s.puller = { image: broken })));
        expect(puller.some((issue) => issue.path === 'spec.puller.image')).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('names the part that is wrong', () => {
    expect(imageProblem('vllm/vllm-openai:-x')).toMatch(/^its tag "-x" is not one/);
    expect(imageProblem('vllm/vllm-openai@sha256:123')).toMatch(/^its digest "sha256:123" is not algorithm:hex/);
    expect(imageProblem('reg_istry.example.com/x:1')).toMatch(/^its registry "reg_istry.example.com"/);
    expect(imageProblem('vllm/Vllm:1')).toMatch(/^its repository part "Vllm"/);
    expect(imageProblem(`${'a'.repeat(256)}:1`)).toMatch(/^its name is 256 characters long/);
  });
});

describe('a spec accepted before these rules', () => {
  it('is accepted again by a replay (asAcceptedBefore), and refused otherwise', () => {
    const old = doc((s) => {
      s.replicas = 2 ** 31;
      s.puller = { deadline: '99999999999999999999h', backoffLimit: 2 ** 40 };
      s.engine = { image: 'vllm/vllm-öpenai:v1', startupTimeout: '25000d' };
      s.resources = { cpu: '1e400' };
    });
    expect(
      issuesOf(old)
        .map((i) => i.path)
        .sort(),
    ).toEqual([
      'spec.engine.image',
      'spec.engine.startupTimeout',
      'spec.puller.backoffLimit',
      'spec.puller.deadline',
      'spec.replicas',
      'spec.resources.cpu',
    ]);
    expect(asAcceptedBefore(() => safeParseServedModel(old)).ok).toBe(true);
  });
});
