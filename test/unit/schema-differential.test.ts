import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseModelYaml } from '../../client/document.js';
import { SCHEMA_FILE } from '../../deploy/schema/spec-schema.js';
import { safeParseServedModel, servedModelSchema } from '../../workflows/contract/index.js';
import { plainDocument } from '../../workflows/contract/spec/input.js';
import { PARSER_ONLY_RULES, type ParserOnlyRule } from '../../workflows/contract/spec/parser-only.js';
import { build, fuzzCase } from '../support/spec-mutations.js';
import { repoRoot } from '../support/local-env.js';
import { fullHf, minimalHf, pvcSource, sloAdmission } from './fixtures.js';

// The parser and the JSON Schema it ships, over the same hostile documents: the fuzz test's mutations and fixed
// broken documents. A document one accepts and the other refuses fails the test, with both verdicts, unless the
// parser refuses it only for rules in PARSER_ONLY_RULES (workflows/contract/spec/parser-only.ts), which a draft-07
// JSON Schema cannot say. FERRY_FUZZ_RUNS sets the number of mutated documents (default 1,000, a few seconds);
// run it longer with FERRY_FUZZ_RUNS=20000 npx vitest run --project unit test/unit/schema-differential.test.ts.
const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 1000);

type Doc = any;

const validate = new Ajv({ strict: true, allErrors: true }).compile(
  JSON.parse(readFileSync(`${repoRoot}/${SCHEMA_FILE}`, 'utf8')),
);

interface Verdicts {
  schema: string[];
  parser: string[];
  /** The parser-only rules the parser refused the document for; null for an issue of any other rule. */
  parserRules: (ParserOnlyRule | null)[];
}

function parserOnlyRules(doc: unknown): (ParserOnlyRule | null)[] {
  const plain = plainDocument(doc);
  if (!('data' in plain)) return ['document-size'];
  const result = servedModelSchema.safeParse(plain.data);
  const rules: (ParserOnlyRule | null)[] = plain.problems.map(() => null);
  for (const issue of result.success ? [] : result.error.issues) {
    const rule = (issue as { params?: { parserOnly?: ParserOnlyRule } }).params?.parserOnly;
    rules.push(rule && rule in PARSER_ONLY_RULES ? rule : null);
  }
  return rules;
}

function verdicts(doc: unknown): Verdicts {
  const schema = validate(doc) ? [] : validate.errors!.map((e) => `${e.instancePath || '/'} ${e.message}`);
  const parsed = safeParseServedModel(doc);
  const parser = parsed.ok ? [] : parsed.issues.map((issue) => `${issue.path}: ${issue.message}`);
  return { schema, parser, parserRules: parsed.ok ? [] : parserOnlyRules(doc) };
}

/** Why the two verdicts disagree in a way the test refuses, or undefined when they agree (or may differ). */
function disagreement(doc: unknown): string | undefined {
  const v = verdicts(doc);
  const schemaAccepts = v.schema.length === 0;
  const parserAccepts = v.parser.length === 0;
  if (schemaAccepts === parserAccepts) return undefined;
  if (schemaAccepts && v.parserRules.length > 0 && v.parserRules.every((rule) => rule !== null)) return undefined;
  const shown = JSON.stringify(doc, (_key, value: unknown) =>
    typeof value === 'string' && value.length > 200 ? `${value.slice(0, 200)}… (${value.length} characters)` : value,
  );
  return [
    `the ${schemaAccepts ? 'JSON Schema' : 'parser'} accepts a document the ${schemaAccepts ? 'parser' : 'JSON Schema'} refuses`,
    `document: ${shown.length > 4000 ? `${shown.slice(0, 4000)}…` : shown}`,
    `JSON Schema: ${schemaAccepts ? 'accepts' : v.schema.slice(0, 10).join('; ')}`,
    `parser: ${parserAccepts ? 'accepts' : v.parser.slice(0, 10).join('; ')}`,
  ].join('\n');
}

const withDoc = (base: Doc, change: (doc: Doc) => void): Doc => {
  const doc = structuredClone(base);
  change(doc);
  return doc;
};

describe('the parser and the JSON Schema', () => {
  it(
    `agree on mutated documents (${RUNS} cases)`,
    () => {
      const counts = { agreed: 0, parserOnly: 0, skipped: 0 };
      fc.assert(
        fc.property(fuzzCase, (fuzz) => {
          const { input, text } = build(fuzz);
          let doc: unknown = input;
          if (text !== undefined) {
            // YAML that does not read as plain data is the reader's to refuse; a JSON Schema sees only data.
            try {
              doc = parseModelYaml(text);
            } catch {
              counts.skipped++;
              return;
            }
          }
          const problem = disagreement(doc);
          expect(problem, problem).toBeUndefined();
          const v = verdicts(doc);
          if ((v.schema.length === 0) === (v.parser.length === 0)) counts.agreed++;
          else counts.parserOnly++;
        }),
        { numRuns: RUNS },
      );
      console.log(
        `schema differential: ${counts.agreed} agreed, ${counts.parserOnly} refused by parser-only rules, ${counts.skipped} YAML not read`,
      );
    },
    60_000 + RUNS * 20,
  );

  const fixed: [title: string, doc: Doc][] = [
    ['the minimal document', minimalHf],
    ['the full document', fullHf],
    ['a pvc source', pvcSource],
    ['an slo', sloAdmission],
    ...['Qwen', 'vllm', '-a', 'a'.repeat(64), 'a_b', ''].map((name): [string, Doc] => [
      `the model name ${JSON.stringify(name)}`,
      withDoc(minimalHf, (d) => (d.metadata.name = name)),
    ]),
    ...['Models', 'a.b', 'x'.repeat(64)].map((ns): [string, Doc] => [
      `the namespace ${ns}`,
      withDoc(minimalHf, (d) => (d.metadata.namespace = ns)),
    ]),
    ...[
      { 'a b': 'x' },
      { '/a': 'x' },
      { 'a/': 'x' },
      { [`${'a'.repeat(254)}/b`]: 'x' },
      { a: '-x' },
      { a: 'b'.repeat(64) },
    ].map((labels): [string, Doc] => [
      `the labels ${JSON.stringify(labels).slice(0, 40)}`,
      withDoc(minimalHf, (d) => (d.metadata.labels = labels)),
    ]),
    ...['https://huggingface.co/a/b', 'a--b', 'a..b', 'a/b/c', `a/${'b'.repeat(96)}`].map((repo): [string, Doc] => [
      `the repo ${repo.slice(0, 40)}`,
      withDoc(minimalHf, (d) => (d.spec.source.huggingface.repo = repo)),
    ]),
    ...['../../main', '--help', 'a//b', '.git', 'x.lock', 'main.', 'a~1', '@{0}', '', 'a'.repeat(256)].map(
      (revision): [string, Doc] => [
        `the revision ${revision.slice(0, 40)}`,
        withDoc(minimalHf, (d) => (d.spec.source.huggingface.revision = revision)),
      ],
    ),
    ...['/abs', 'a//b', './a', 'a/..', 'a/./b', 'a\u0000b', 'ok/...'].map((path): [string, Doc] => [
      `the claim path ${JSON.stringify(path)}`,
      withDoc(pvcSource, (d) => (d.spec.source.pvc.path = path)),
    ]),
    ...[
      'vllm openai',
      'vllm/Vllm:1',
      'vllm/vllm-openai:-x',
      'reg_istry.example.com/x:1',
      'a:b:c',
      'host:5000',
      'x@sha256:12',
      `${'a'.repeat(256)}:1`,
      'localhost/a',
      'Registry.Example.com/a/b',
    ].map((image): [string, Doc] => [
      `the image ${image.slice(0, 40)}`,
      withDoc(minimalHf, (d) => (d.spec.engine = { image })),
    ]),
    ...[
      ['--por=9'],
      ['--served_model', 'x'],
      ['--api-k=secret'],
      ['--m', '/x'],
      ['--x y'],
      ['4096'],
      ['--enforce-eager=1'],
      ['-1.5'],
      ['--max-model-len=4096', '--seed=-1', '-O3', '--'],
    ].map((args): [string, Doc] => [
      `the args ${JSON.stringify(args)}`,
      withDoc(minimalHf, (d) => (d.spec.engine = { args })),
    ]),
    ...[
      [{ name: 'HF_TOKEN', value: 'x' }],
      [{ name: '1A' }],
      [{ name: 'toString', value: 'x' }],
      [
        { name: 'A', value: 1 },
        { name: 'A', value: 2 },
      ],
      [{ name: 'A', value: 'x', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
    ].map((env): [string, Doc] => [
      `the engine env ${JSON.stringify(env).slice(0, 60)}`,
      withDoc(minimalHf, (d) => (d.spec.engine = { env })),
    ]),
    [
      'a puller variable FERRY_X',
      withDoc(minimalHf, (d) => (d.spec.puller = { env: [{ name: 'FERRY_X', value: '1' }] })),
    ],
    ...[2 ** 31, -1, 1.5, 2 ** 53].map((n): [string, Doc] => [
      `replicas ${n}`,
      withDoc(minimalHf, (d) => (d.spec.replicas = n)),
    ]),
    ...['0', '-1Gi', '1e400', '9007199254740992', 'lots', '1.5Gi', 0, -2, 1e300].map((q): [string, Doc] => [
      `the memory ${q}`,
      withDoc(minimalHf, (d) => (d.spec.resources = { memory: q, shmSize: '1' })),
    ]),
    ...['0s', '3651d', '45 minutes', ' 90s ', '1h30m', '0.0001ms'].map((t): [string, Doc] => [
      `the deadline ${JSON.stringify(t)}`,
      withDoc(minimalHf, (d) => (d.spec.puller = { deadline: t })),
    ]),
    ['shm as large as memory', withDoc(minimalHf, (d) => (d.spec.resources = { memory: '4Gi', shmSize: '4Gi' }))],
    ['the own volume as source', withDoc(pvcSource, (d) => (d.spec.source.pvc.claimName = 'ckpt-eval-weights'))],
    ['adapters without LoRA', withDoc(minimalHf, (d) => (d.spec.engine = { lora: { adapters: [] } }))],
    [
      'two replicas on a one-pod volume',
      withDoc(minimalHf, (d) => ((d.spec.storage = { accessMode: 'ReadWriteOncePod' }), (d.spec.replicas = 2))),
    ],
    ['no source', withDoc(minimalHf, (d) => (d.spec.source = {}))],
    [
      'an adapter with two sources',
      withDoc(
        minimalHf,
        (d) =>
          (d.spec.engine = {
            lora: {
              enabled: true,
              adapters: [{ name: 'a', source: { huggingface: { repo: 'a/b' }, pvc: { claimName: 'c' } } }],
            },
          }),
      ),
    ],
    [
      'a toleration without key or Exists',
      withDoc(minimalHf, (d) => (d.spec.scheduling = { tolerations: [{ operator: 'Equal' }] })),
    ],
    [
      'a Gt requirement with a word',
      withDoc(
        minimalHf,
        (d) =>
          (d.spec.scheduling = {
            affinity: {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [{ matchExpressions: [{ key: 'a', operator: 'Gt', values: ['x'] }] }],
                },
              },
            },
          }),
      ),
    ],
  ];

  it.each(fixed)('agree on %s', (_title, doc) => {
    const problem = disagreement(doc);
    expect(problem, problem).toBeUndefined();
  });

  // The rules between fields that the JSON Schema states too (if/then), each on both sides of its line.
  const adapter = { name: 'sql', source: { huggingface: { repo: 'a/sql' } } };
  const onePod = (spec: Doc): Doc =>
    withDoc(minimalHf, (d) => Object.assign(d.spec, { storage: { accessMode: 'ReadWriteOncePod' }, ...spec }));
  const toleration = (t: Doc): Doc => withDoc(minimalHf, (d) => (d.spec.scheduling = { tolerations: [t] }));
  const nodeRequirement = (requirement: Doc): Doc =>
    withDoc(minimalHf, (d) => {
      const term = { matchExpressions: [{ key: 'gpu.count', ...requirement }] };
      d.spec.scheduling = {
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [term] } } },
      };
    });
  const podRequirement = (requirement: Doc): Doc =>
    withDoc(minimalHf, (d) => {
      const labelSelector = { matchExpressions: [{ key: 'app', ...requirement }] };
      const term = { labelSelector, topologyKey: 'kubernetes.io/hostname' };
      d.spec.scheduling = { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term] } } };
    });
  const secret = { secretKeyRef: { name: 's', key: 'k' } };
  const ruleCases: [title: string, doc: Doc, valid: boolean][] = [
    [
      'LoRA enabled with adapters',
      withDoc(minimalHf, (d) => (d.spec.engine = { lora: { enabled: true, adapters: [adapter] } })),
      true,
    ],
    [
      'adapters with LoRA off',
      withDoc(minimalHf, (d) => (d.spec.engine = { lora: { enabled: false, adapters: [adapter] } })),
      false,
    ],
    ['LoRA off without adapters', withDoc(minimalHf, (d) => (d.spec.engine = { lora: { enabled: false } })), true],
    ['a one-pod volume with the default replicas', onePod({}), true],
    ['a one-pod volume with 0 replicas', onePod({ replicas: 0 }), true],
    ['a one-pod volume with 1 replica', onePod({ replicas: 1 }), true],
    [
      'a one-pod volume with an empty list of adapters',
      onePod({ engine: { lora: { enabled: true, adapters: [] } } }),
      true,
    ],
    ['a one-pod volume with an adapter', onePod({ engine: { lora: { enabled: true, adapters: [adapter] } } }), false],
    [
      'a ReadWriteOnce volume with 3 replicas and an adapter',
      withDoc(minimalHf, (d) =>
        Object.assign(d.spec, {
          replicas: 3,
          storage: { accessMode: 'ReadWriteOnce' },
          engine: { lora: { enabled: true, adapters: [adapter] } },
        }),
      ),
      true,
    ],
    ['a toleration of every taint', toleration({ operator: 'Exists' }), true],
    ['a toleration of a key, Equal by default', toleration({ key: 'a' }), true],
    ['a toleration Exists with an empty value', toleration({ key: 'a', operator: 'Exists', value: '' }), true],
    ['a toleration Exists with a value', toleration({ key: 'a', operator: 'Exists', value: 'b' }), false],
    [
      'a toleration with seconds and NoExecute',
      toleration({ key: 'a', value: 'b', effect: 'NoExecute', tolerationSeconds: 30 }),
      true,
    ],
    ['a toleration with seconds and no effect', toleration({ key: 'a', tolerationSeconds: 30 }), false],
    [
      'a toleration with seconds and NoSchedule',
      toleration({ key: 'a', effect: 'NoSchedule', tolerationSeconds: 30 }),
      false,
    ],
    ['a toleration with an empty key and Equal', toleration({ key: '', operator: 'Equal' }), false],
    ['an empty toleration', toleration({}), false],
    ['a node requirement In with a value', nodeRequirement({ operator: 'In', values: ['a'] }), true],
    ['a node requirement In with no values', nodeRequirement({ operator: 'In', values: [] }), false],
    ['a node requirement NotIn without values', nodeRequirement({ operator: 'NotIn' }), false],
    ['a node requirement Exists without values', nodeRequirement({ operator: 'Exists' }), true],
    ['a node requirement Exists with an empty list', nodeRequirement({ operator: 'Exists', values: [] }), true],
    [
      'a node requirement DoesNotExist with a value',
      nodeRequirement({ operator: 'DoesNotExist', values: ['a'] }),
      false,
    ],
    ['a node requirement Gt 8', nodeRequirement({ operator: 'Gt', values: ['8'] }), true],
    ['a node requirement Lt -3', nodeRequirement({ operator: 'Lt', values: ['-3'] }), true],
    ['a node requirement Gt with two numbers', nodeRequirement({ operator: 'Gt', values: ['1', '2'] }), false],
    ['a node requirement Lt without values', nodeRequirement({ operator: 'Lt' }), false],
    ['a node requirement Lt 1.5', nodeRequirement({ operator: 'Lt', values: ['1.5'] }), false],
    ['a node requirement Gt with 19 digits', nodeRequirement({ operator: 'Gt', values: ['1'.repeat(19)] }), false],
    ['a pod requirement In with a value', podRequirement({ operator: 'In', values: ['a'] }), true],
    ['a pod requirement In with no values', podRequirement({ operator: 'In', values: [] }), false],
    ['a pod requirement Exists with a value', podRequirement({ operator: 'Exists', values: ['a'] }), false],
    ['a pod requirement Gt', podRequirement({ operator: 'Gt', values: ['8'] }), false],
    [
      'an engine variable from a Secret',
      withDoc(minimalHf, (d) => (d.spec.engine = { env: [{ name: 'A', valueFrom: secret }] })),
      true,
    ],
    ['an engine variable without a value', withDoc(minimalHf, (d) => (d.spec.engine = { env: [{ name: 'A' }] })), true],
    [
      'a puller variable with value and valueFrom',
      withDoc(minimalHf, (d) => (d.spec.puller = { env: [{ name: 'A', value: '', valueFrom: secret }] })),
      false,
    ],
    ...['+1', '00.5Gi', '.5', '1e-3'].map((q): [string, Doc, boolean] => [
      `the size ${q}`,
      withDoc(minimalHf, (d) => (d.spec.storage = { size: q })),
      true,
    ]),
    ...['-0', '+0', '0.0Gi', '.0', '0e9', '-1', 0, -0.5].map((q): [string, Doc, boolean] => [
      `the size ${q}`,
      withDoc(minimalHf, (d) => (d.spec.storage = { size: q })),
      false,
    ]),
    ...['0.5ms', '0m1s', '1d0h'].map((t): [string, Doc, boolean] => [
      `the deadline ${t}`,
      withDoc(minimalHf, (d) => (d.spec.puller = { deadline: t })),
      true,
    ]),
    ...['0.0s', '0m0s', '00d'].map((t): [string, Doc, boolean] => [
      `the deadline ${t}`,
      withDoc(minimalHf, (d) => (d.spec.puller = { deadline: t })),
      false,
    ]),
  ];

  it.each(ruleCases.map(([title, doc, valid]) => ({ title, doc, valid })))(
    'agree on $title (valid: $valid)',
    ({ doc, valid }) => {
      const problem = disagreement(doc);
      expect(problem, problem).toBeUndefined();
      const v = verdicts(doc);
      expect({ schema: v.schema.length === 0, parser: v.parser.length === 0 }).toEqual({
        schema: valid,
        parser: valid,
      });
    },
  );

  it.each([
    ['a quantity that rounds to 0', withDoc(minimalHf, (d) => (d.spec.storage = { size: '1e-400' })), 'quantity-range'],
    [
      'a duration that rounds to 0',
      withDoc(minimalHf, (d) => (d.spec.puller = { deadline: '0.4ms' })),
      'duration-range',
    ],
  ])('refuse %s only in the parser, for its range', (_title, doc, rule) => {
    expect(verdicts(doc)).toMatchObject({ schema: [], parserRules: [rule] });
  });

  it('refuse a document for a parser-only rule only in the parser', () => {
    const doc = withDoc(minimalHf, (d) => (d.spec.resources = { memory: '4Gi', shmSize: '8Gi' }));
    expect(verdicts(doc)).toEqual({
      schema: [],
      parser: [expect.stringMatching(/^spec\.resources\.shmSize: must be smaller/)],
      parserRules: ['shm-below-memory'],
    });
  });
});
