// Hostile ServedModel documents for property tests: valid documents (the unit fixtures) with mutations applied, each
// small enough to print as a counterexample, and whether the mutations make the document valid, invalid or unknown.
// Used by the parser's fuzz test and by the differential test of the parser and the JSON Schema.
import fc from 'fast-check';
import { stringify } from 'yaml';
import { DOCUMENT_LIMITS } from '../../workflows/contract/index.js';
import { fullHf, minimalHf, pvcSource } from '../unit/fixtures.js';

type Doc = any;
type Path = (string | number)[];

const BASES: Doc[] = [minimalHf, fullHf, pvcSource];
const FERRY_FLAGS = ['--model', '--served-model-name', '--port', '--api-key'];
// The oracle, written apart from the code under test: C0, DEL, C1, bidi controls, lone surrogates.
const UNSAFE =
  // eslint-disable-next-line no-control-regex -- these are exactly the characters the spec must reject
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

// ---------------------------------------------------------------------------------------------------------------
// Mutations: small descriptions (so a counterexample prints short), applied to a copy of the base document.

type Validity = 'valid' | 'invalid' | 'unknown';

type Mutation =
  | { kind: 'none' }
  | { kind: 'genuine-flag'; arg: string }
  | { kind: 'random-string'; target: number; value: string }
  | { kind: 'unsafe-char'; target: number; at: number; unit: number }
  | { kind: 'unsafe-key'; target: number; unit: number }
  | { kind: 'flag-prefix'; flag: string; length: number; underscores: boolean; form: 'bare' | 'equals' | 'separate' }
  | { kind: 'bad-enum'; site: string; value: string }
  | { kind: 'bad-operator-values'; site: 'node' | 'label'; operator: string; values: string[] | null }
  | { kind: 'bad-revision'; value: string }
  | { kind: 'huge'; target: number; length: number }
  | { kind: 'deep'; target: number; depth: number; shape: 'list' | 'mapping' }
  | { kind: 'wide'; count: number }
  | { kind: 'yaml-tag'; target: number; tagged: string }
  | { kind: 'yaml-alias'; target: number }
  | { kind: 'yaml-bomb' }
  | { kind: 'yaml-duplicate' };

const unsafeUnit = fc.oneof(
  fc.integer({ min: 0x00, max: 0x1f }),
  fc.integer({ min: 0x7f, max: 0x9f }),
  fc.constantFrom(0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069),
  fc.integer({ min: 0xd800, max: 0xdfff }),
);
const anyUnits = fc.string({
  unit: fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u)),
  maxLength: 40,
});
const target = fc.nat(10_000);

const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteOncePod', 'ReadWriteMany'];
const NODE_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'];
const LABEL_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

const ensure = (parent: Doc, key: string): Doc => (parent[key] = parent[key] ?? {});
const scheduling = (doc: Doc): Doc => ensure(doc.spec, 'scheduling');
const tolerate = (doc: Doc, toleration: object) => {
  const s = scheduling(doc);
  s.tolerations = [...(s.tolerations ?? []), toleration];
};
const nodeRequirement = (doc: Doc, field: 'matchExpressions' | 'matchFields', requirement: object) => {
  scheduling(doc).affinity = {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ [field]: [requirement] }] },
    },
  };
};
const labelRequirement = (doc: Doc, requirement: object) => {
  scheduling(doc).affinity = {
    podAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: [
        { labelSelector: { matchExpressions: [requirement] }, topologyKey: 'kubernetes.io/hostname' },
      ],
    },
  };
};

const ENUM_SITES: { name: string; allowed: string[]; set: (doc: Doc, value: string) => void }[] = [
  { name: 'accessMode', allowed: ACCESS_MODES, set: (d, v) => (ensure(d.spec, 'storage').accessMode = v) },
  { name: 'toleration operator', allowed: ['Exists', 'Equal'], set: (d, v) => tolerate(d, { key: 'k', operator: v }) },
  {
    name: 'toleration effect',
    allowed: ['NoSchedule', 'PreferNoSchedule', 'NoExecute'],
    set: (d, v) => tolerate(d, { key: 'k', operator: 'Exists', effect: v }),
  },
  {
    name: 'node operator',
    allowed: NODE_OPERATORS,
    set: (d, v) => nodeRequirement(d, 'matchExpressions', { key: 'zone', operator: v, values: ['1'] }),
  },
  {
    name: 'node field operator',
    allowed: ['In', 'NotIn'],
    set: (d, v) => nodeRequirement(d, 'matchFields', { key: 'metadata.name', operator: v, values: ['n'] }),
  },
  {
    name: 'label operator',
    allowed: LABEL_OPERATORS,
    set: (d, v) => labelRequirement(d, { key: 'app', operator: v, values: ['a'] }),
  },
];
const NEAR_MISSES = [
  ...[...ACCESS_MODES, ...NODE_OPERATORS, 'Equal', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'].flatMap((v) => [
    v.toLowerCase(),
    v.toUpperCase(),
    `${v} `,
    ` ${v}`,
    v.slice(0, -1),
    `${v}\u0000`,
  ]),
  'RWO',
  '',
  'Gt',
  'Lt',
];

const BAD_REVISIONS = [
  '../../main',
  '--help',
  '-x',
  'a/../b',
  '..',
  '.',
  '/main',
  'main/',
  'a//b',
  '.git',
  'x.lock',
  'main.',
  'a b',
  'a~1',
  'a^',
  'a:b',
  'a?',
  'a*',
  'a[b',
  'a\\b',
  '@{0}',
  '',
];

const TAGGED = [
  '!!set {a, b}',
  '!!omap [{a: 1}]',
  '!!pairs [{a: 1}]',
  '!!binary aGVsbG8=',
  '!!timestamp 2001-12-14',
  '!local x',
  '!<tag:example.com,2000:x> x',
];

const GENUINE_FLAGS = [
  '--max-model-len=4096',
  '--gpu-memory-utilization=0.9',
  '--model-impl=vllm',
  '--port-range=1',
  '--ports',
  '--apikey=1',
  '--api-server-count=2',
  '--served-model-name-x',
  '--seed=-1',
  '-tp=2',
  '-O3',
];

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('genuine-flag' as const), arg: fc.constantFrom(...GENUINE_FLAGS) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('random-string' as const), target, value: anyUnits }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('unsafe-char' as const), target, at: fc.nat(100), unit: unsafeUnit }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('unsafe-key' as const), target, unit: unsafeUnit }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...FERRY_FLAGS).chain((flag) =>
      fc.record({
        kind: fc.constant('flag-prefix' as const),
        flag: fc.constant(flag),
        length: fc.integer({ min: 3, max: flag.length }),
        underscores: fc.boolean(),
        form: fc.constantFrom('bare' as const, 'equals' as const, 'separate' as const),
      }),
    ),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...ENUM_SITES).chain((site) =>
      fc
        .oneof(fc.string({ maxLength: 12 }), fc.constantFrom(...NEAR_MISSES))
        .filter((value) => !site.allowed.includes(value))
        .map((value) => ({ kind: 'bad-enum' as const, site: site.name, value })),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.oneof(
      fc.record({
        kind: fc.constant('bad-operator-values' as const),
        site: fc.constantFrom('node' as const, 'label' as const),
        operator: fc.constantFrom('Exists', 'DoesNotExist'),
        values: fc.array(fc.string({ maxLength: 5 }), { minLength: 1, maxLength: 3 }),
      }),
      fc.record({
        kind: fc.constant('bad-operator-values' as const),
        site: fc.constantFrom('node' as const, 'label' as const),
        operator: fc.constantFrom('In', 'NotIn'),
        values: fc.constantFrom<string[] | null>([], null),
      }),
      fc.record({
        kind: fc.constant('bad-operator-values' as const),
        site: fc.constant('node' as const),
        operator: fc.constantFrom('Gt', 'Lt'),
        values: fc.oneof(
          fc.constantFrom<string[] | null>([], null, ['1', '2'], ['1.5'], ['x'], [''], ['0x10'], ['1e3']),
          fc.array(fc.integer().map(String), { minLength: 2, maxLength: 3 }),
        ),
      }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('bad-revision' as const),
      value: fc.oneof(
        fc.constantFrom(...BAD_REVISIONS),
        fc.string({ maxLength: 10 }).map((s) => `-${s}`),
        fc.string({ maxLength: 10 }).map((s) => `${s}/../x`),
        fc.string({ maxLength: 10 }).map((s) => `x/.${s}`),
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('huge' as const),
      target,
      length: fc.oneof(
        fc.integer({ min: DOCUMENT_LIMITS.characters + 1, max: 2 * DOCUMENT_LIMITS.characters }),
        fc.constant(5 * 1024 * 1024),
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('deep' as const),
      target,
      depth: fc.oneof(fc.integer({ min: 64, max: 200 }), fc.integer({ min: 200, max: 100_000 })),
      shape: fc.constantFrom('list' as const, 'mapping' as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('wide' as const),
      count: fc.integer({ min: DOCUMENT_LIMITS.values + 1, max: 5 * DOCUMENT_LIMITS.values }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('yaml-tag' as const), target, tagged: fc.constantFrom(...TAGGED) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('yaml-alias' as const), target }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'yaml-bomb' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'yaml-duplicate' as const }) },
);

export const fuzzCase = fc.record({
  base: fc.nat(BASES.length - 1),
  yaml: fc.boolean(),
  mutations: fc.array(mutation, { minLength: 1, maxLength: 3 }),
});
export type FuzzCase = typeof fuzzCase extends fc.Arbitrary<infer T> ? T : never;

function leavesOf(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (typeof value === 'string') out.push(path);
  else if (Array.isArray(value)) value.forEach((item, i) => leavesOf(item, [...path, i], out));
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) leavesOf(item, [...path, key], out);
  }
  return out;
}

function keysOf(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) value.forEach((item, i) => keysOf(item, [...path, i], out));
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      out.push([...path, key]);
      keysOf(item, [...path, key], out);
    }
  }
  return out;
}

function parentOf(doc: Doc, path: Path): { parent: Doc; key: string | number } | undefined {
  let node = doc;
  for (const segment of path.slice(0, -1)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = node[segment];
  }
  return node !== null && typeof node === 'object' ? { parent: node, key: path[path.length - 1]! } : undefined;
}

function stringAt(doc: Doc, path: Path): { parent: Doc; key: string | number; value: string } | undefined {
  const found = parentOf(doc, path);
  const value = found?.parent[found.key];
  return found && typeof value === 'string' ? { ...found, value } : undefined;
}

function deepValue(depth: number, shape: 'list' | 'mapping'): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = shape === 'list' ? [value] : { a: value };
  return value;
}

const deepText = (depth: number, shape: 'list' | 'mapping') =>
  shape === 'list' ? `${'['.repeat(depth)}x${']'.repeat(depth)}` : `${'{a: '.repeat(depth)}x${'}'.repeat(depth)}`;

const BOMB = [
  'lol0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
  ...Array.from({ length: 8 }, (_, i) => `lol${i + 1}: &l${i + 1} [${Array(9).fill(`*l${i}`).join(',')}]`),
].join('\n');

/** A document (or YAML text) built from the case, and whether the mutations make it valid, invalid or unknown. */
export function build(fuzz: FuzzCase): { input: Doc; text?: string; validity: Validity } {
  const doc: Doc = structuredClone(BASES[fuzz.base]);
  const leaves = leavesOf(doc);
  const keys = keysOf(doc);
  const texts: [placeholder: string, text: string][] = [];
  const appended: string[] = [];
  let invalid = false;
  let unknown = false;
  const placeholder = (path: Path, text: string): boolean => {
    const found = parentOf(doc, path);
    if (!found) return false;
    const name = `FERRYPLACEHOLDER${texts.length}X`;
    found.parent[found.key] = name;
    texts.push([name, text]);
    return true;
  };
  const args = (): string[] => {
    const engine = ensure(doc.spec, 'engine');
    if (!Array.isArray(engine.args)) engine.args = [];
    return engine.args as string[];
  };
  // Mutations that may leave the document valid come first: a later known-invalid one is never undone. Renaming
  // a key comes last, as it may move the parts the others change.
  const order = (m: Mutation) =>
    m.kind === 'none' || m.kind === 'genuine-flag' || m.kind === 'random-string' ? 0 : m.kind === 'unsafe-key' ? 2 : 1;
  for (const m of [...fuzz.mutations].sort((a, b) => order(a) - order(b))) {
    const leaf = 'target' in m ? leaves[m.target % leaves.length]! : [];
    switch (m.kind) {
      case 'none':
        break;
      case 'genuine-flag':
        args().push(m.arg);
        break;
      case 'random-string': {
        const found = parentOf(doc, leaf);
        if (!found) break;
        found.parent[found.key] = m.value;
        if (UNSAFE.test(m.value)) invalid = true;
        else unknown = true;
        break;
      }
      case 'unsafe-char': {
        const found = stringAt(doc, leaf);
        if (!found) break;
        const at = m.at % (found.value.length + 1);
        // Surrogates get a plain neighbour each side, so they cannot pair up with one already there.
        const unit = String.fromCharCode(m.unit);
        const inserted = m.unit >= 0xd800 && m.unit <= 0xdfff ? `x${unit}x` : unit;
        found.parent[found.key] = found.value.slice(0, at) + inserted + found.value.slice(at);
        invalid = true;
        break;
      }
      case 'unsafe-key': {
        const path = keys[m.target % keys.length]!;
        const found = parentOf(doc, path);
        if (!found || Array.isArray(found.parent) || !(found.key in found.parent)) break;
        const key = String(found.key);
        const value = found.parent[key];
        delete found.parent[key];
        const unit = String.fromCharCode(m.unit);
        found.parent[m.unit >= 0xd800 && m.unit <= 0xdfff ? `${key}x${unit}x` : `${key}${unit}`] = value;
        invalid = true;
        break;
      }
      case 'flag-prefix': {
        let name = m.flag.slice(0, m.length);
        if (m.underscores) name = `--${name.slice(2).replace(/-/g, '_')}`;
        const items = m.form === 'bare' ? [name] : m.form === 'equals' ? [`${name}=x`] : [name, 'x'];
        args().push(...items);
        invalid = true;
        break;
      }
      case 'bad-enum':
        ENUM_SITES.find((site) => site.name === m.site)!.set(doc, m.value);
        invalid = true;
        break;
      case 'bad-operator-values': {
        const requirement = { key: 'zone', operator: m.operator, ...(m.values === null ? {} : { values: m.values }) };
        if (m.site === 'node') nodeRequirement(doc, 'matchExpressions', requirement);
        else labelRequirement(doc, requirement);
        invalid = true;
        break;
      }
      case 'bad-revision':
        if (doc.spec.source?.huggingface) doc.spec.source.huggingface.revision = m.value;
        else doc.spec.source = { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: m.value } };
        invalid = true;
        break;
      case 'huge': {
        const found = parentOf(doc, leaf);
        if (!found) break;
        found.parent[found.key] = 'x'.repeat(m.length);
        invalid = true;
        break;
      }
      case 'deep':
        if (fuzz.yaml) {
          if (placeholder(leaf, deepText(m.depth, m.shape))) invalid = true;
        } else {
          const found = parentOf(doc, leaf);
          if (!found) break;
          found.parent[found.key] = deepValue(m.depth, m.shape);
          invalid = true;
        }
        break;
      case 'wide':
        ensure(doc.spec, 'engine').args = Array.from({ length: m.count }, (_, i) => `--flag-${i}=1`);
        invalid = true;
        break;
      case 'yaml-tag':
        if (fuzz.yaml && placeholder(leaf, m.tagged)) invalid = true;
        break;
      case 'yaml-alias':
        if (fuzz.yaml && placeholder(leaf, '*nowhere')) invalid = true;
        break;
      case 'yaml-bomb':
        if (fuzz.yaml) {
          appended.push(BOMB);
          invalid = true;
        }
        break;
      case 'yaml-duplicate':
        if (fuzz.yaml) {
          appended.push('kind: ServedModel');
          invalid = true;
        }
        break;
    }
  }
  const validity: Validity = invalid ? 'invalid' : unknown ? 'unknown' : 'valid';
  if (!fuzz.yaml) return { input: doc, validity };
  let text = stringify(doc, { lineWidth: 0 });
  for (const [name, replacement] of texts) text = text.replace(name, replacement);
  for (const lines of appended) text += `${lines}\n`;
  return { input: doc, text, validity };
}
