import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseModelDocument, parseModelYaml } from '../../client/document.js';
import { InvalidSpecError } from '../../client/errors.js';
import { DOCUMENT_LIMITS, type SpecIssue } from '../../workflows/contract/index.js';
import { fullHf, minimalHf, pvcSource } from './fixtures.js';

// Hostile input: every document here must fail with an InvalidSpecError naming the field, before anything is
// started. Documents are untyped on purpose: they are what a person (or an attacker) might write.
type Doc = any;

const clone = <T>(value: T): T => structuredClone(value);

function rejection(run: () => unknown): InvalidSpecError {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidSpecError) return err;
    throw err;
  }
  throw new Error('expected an InvalidSpecError, but the document was accepted');
}

const issuesOf = (doc: unknown): SpecIssue[] => rejection(() => parseModelDocument(doc)).issues;
const yamlIssuesOf = (text: string): SpecIssue[] => rejection(() => parseModelDocument(parseModelYaml(text))).issues;

function withDoc(base: Doc, mutate: (doc: Doc) => void): Doc {
  const doc = clone(base);
  mutate(doc);
  return doc;
}

// The fastest of three runs: the time is the parser's, not that of other tests sharing the cores.
function timed<T>(run: () => T): { value: T; ms: number } {
  let fastest = Infinity;
  let value!: T;
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    value = run();
    fastest = Math.min(fastest, performance.now() - start);
  }
  return { value, ms: fastest };
}

const exampleText = (file: string) => readFileSync(new URL(`../../examples/${file}`, import.meta.url), 'utf8');

// Eight lines: what a test appends starts on line 9.
const minimalYaml = [
  'apiVersion: ferry.dev/v1alpha1',
  'kind: ServedModel',
  'metadata:',
  '  name: qwen',
  'spec:',
  '  source:',
  '    huggingface:',
  '      repo: Qwen/Qwen2.5-0.5B-Instruct',
  '',
].join('\n');

describe('strings with control, bidi or lone surrogate characters', () => {
  type Case = [where: string, mutate: (doc: Doc) => void, path: string, message: string];
  const cases: Case[] = [
    [
      'image (ESC)',
      (d) => (d.spec.engine.image = 'vllm\u001b[31m'),
      'spec.engine.image',
      'contains a control character (U+001B) at position 4',
    ],
    [
      'servedModelName (right-to-left override)',
      (d) => (d.spec.engine.servedModelName = 'qwen\u202e'),
      'spec.engine.servedModelName',
      'contains an invisible bidirectional control character (U+202E) at position 4',
    ],
    [
      'an argument (NUL before "=")',
      (d) => (d.spec.engine.args = ['--api-key\u0000=x']),
      'spec.engine.args[0]',
      'contains a control character (U+0000) at position 9',
    ],
    [
      'an env name (DEL)',
      (d) => (d.spec.engine.env = [{ name: 'A\u007f', value: '1' }]),
      'spec.engine.env[0].name',
      'contains a control character (U+007F) at position 1',
    ],
    [
      'an env value (newline)',
      (d) => (d.spec.engine.env = [{ name: 'A', value: 'one\ntwo' }]),
      'spec.engine.env[0].value',
      'contains a control character (U+000A) at position 3',
    ],
    [
      'an env value (lone surrogate)',
      (d) => (d.spec.engine.env = [{ name: 'A', value: 'x\ud800' }]),
      'spec.engine.env[0].value',
      'contains a lone surrogate (U+D800) at position 1',
    ],
    [
      'a label value (C1 NEL)',
      (d) => (d.metadata.labels.team = 'ml\u0085'),
      'metadata.labels.team',
      'contains a control character (U+0085) at position 2',
    ],
    [
      'a label key (BEL)',
      (d) => (d.metadata.labels = { 'te\u0007am': 'x' }),
      'metadata.labels["te\\u0007am"]',
      'its key contains a control character (U+0007) at position 2',
    ],
    [
      'a node selector value (left-to-right isolate)',
      (d) => (d.spec.scheduling.nodeSelector = { zone: '\u2066a' }),
      'spec.scheduling.nodeSelector.zone',
      'contains an invisible bidirectional control character (U+2066) at position 0',
    ],
    [
      'the repo (Arabic letter mark)',
      (d) => (d.spec.source.huggingface.repo = 'Qwen/Q\u061cwen'),
      'spec.source.huggingface.repo',
      'contains an invisible bidirectional control character (U+061C) at position 6',
    ],
    [
      'the revision (tab)',
      (d) => (d.spec.source.huggingface.revision = 'main\t'),
      'spec.source.huggingface.revision',
      'contains a control character (U+0009) at position 4',
    ],
    [
      'a secret key (lone low surrogate)',
      (d) => (d.spec.engine.apiKeySecret.key = '\udc00key'),
      'spec.engine.apiKeySecret.key',
      'contains a lone surrogate (U+DC00) at position 0',
    ],
    [
      'a secret name (left-to-right mark)',
      (d) => (d.spec.source.huggingface.tokenSecret.name = 'hf\u200etoken'),
      'spec.source.huggingface.tokenSecret.name',
      'contains an invisible bidirectional control character (U+200E) at position 2',
    ],
    [
      'a toleration value (CR)',
      (d) => (d.spec.scheduling.tolerations[1].value = 'true\r'),
      'spec.scheduling.tolerations[1].value',
      'contains a control character (U+000D) at position 4',
    ],
    [
      'an affinity value (U+009B, the C1 escape)',
      (d) =>
        (d.spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values =
          ['\u009b31m']),
      'spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]',
      'contains a control character (U+009B) at position 0',
    ],
    [
      'the puller image (pop directional isolate)',
      (d) => (d.spec.puller.image = 'registry.example.com/hf\u2069'),
      'spec.puller.image',
      'contains an invisible bidirectional control character (U+2069) at position 23',
    ],
  ];

  it.each(cases)('rejects one in %s', (_where, mutate, path, message) => {
    expect(issuesOf(withDoc(fullHf, mutate))).toContainEqual({ path, message });
  });

  it('rejects one in a pvc path and a claim name', () => {
    const issues = issuesOf(
      withDoc(pvcSource, (d) => (d.spec.source.pvc = { claimName: 'ck\u001b', path: 'a\u202eb' })),
    );
    expect(issues).toContainEqual({
      path: 'spec.source.pvc.claimName',
      message: 'contains a control character (U+001B) at position 2',
    });
    expect(issues).toContainEqual({
      path: 'spec.source.pvc.path',
      message: 'contains an invisible bidirectional control character (U+202E) at position 1',
    });
  });

  it('finds them in YAML too, written as escapes', () => {
    const text = minimalYaml.replace('name: qwen', 'name: "qw\\u202Een"');
    expect(yamlIssuesOf(text)).toContainEqual({
      path: 'metadata.name',
      message: 'contains an invisible bidirectional control character (U+202E) at position 2',
    });
  });

  it('accepts other Unicode text, surrogate pairs included', () => {
    const doc = withDoc(fullHf, (d) => (d.spec.engine.env = [{ name: 'GREETING', value: 'grüß dich 🙂 مرحبا' }]));
    expect(parseModelDocument(doc).spec.engine.env).toEqual([{ name: 'GREETING', value: 'grüß dich 🙂 مرحبا' }]);
  });

  it('echoes no such character in any message', () => {
    const doc = withDoc(fullHf, (d) => {
      d.spec.engine.image = 'a b\u202e\u001b[2J';
      d.metadata.labels = { 'x\u202ey': 'v' };
    });
    const { issues, message } = rejection(() => parseModelDocument(doc));
    expect(issues).toContainEqual({
      path: 'spec.engine.image',
      message: 'must be a container image like vllm/vllm-openai:v0.32.0, got "a b\\u202e\\u001b[2J"',
    });
    // Newlines separate the issues; nothing else of C0, C1 or the bidi controls may reach a terminal.
    // eslint-disable-next-line no-control-regex -- the characters a message must not contain
    expect(message).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
  });
});

describe('vLLM arguments that abbreviate a flag Ferry sets', () => {
  const rejected: [args: string[], flag: string][] = [
    [['--served-model=x'], '--served-model-name'],
    [['--served_model', 'x'], '--served-model-name'],
    [['--por=9'], '--port'],
    [['--por', '9'], '--port'],
    [['--p=9'], '--port'],
    [['--api-k=secret'], '--api-key'],
    [['--api', 'secret'], '--api-key'],
    [['--mod=/x'], '--model'],
    [['--m', '/x'], '--model'],
  ];

  it.each(rejected)('rejects %j as %s', (args, flag) => {
    const [issue] = issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { args })));
    expect(issue?.path).toBe('spec.engine.args[0]');
    const name = args[0]!.split('=')[0]!;
    expect(issue?.message).toMatch(new RegExp(`^"${name}" abbreviates ${flag} \\(vLLM reads a prefix`));
  });

  it('says what to set instead', () => {
    expect(issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { args: ['--por=9'] })))).toEqual([
      {
        path: 'spec.engine.args[0]',
        message:
          '"--por" abbreviates --port (vLLM reads a prefix of a flag as the flag): --port is set by Ferry; use engine.port',
      },
    ]);
  });

  it('keeps the exact flags rejected as before', () => {
    expect(issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { args: ['--api_key=x'] })))[0]?.message).toMatch(
      /^--api-key must not be passed as an argument/,
    );
  });

  it('accepts other vLLM flags, even ones that start with a flag Ferry sets', () => {
    const args = [
      '--max-model-len=4096',
      '--model-impl=vllm',
      '--port-range=1',
      '--api-server-count',
      '2',
      '--served-model-name-suffix=x',
      '--seed=-1',
      '-tp=2',
      '-O3',
      '--',
    ];
    expect(parseModelDocument(withDoc(minimalHf, (d) => (d.spec.engine = { args }))).spec.engine.args).toEqual(args);
  });
});

describe('Kubernetes enums and their values', () => {
  const nodeTerm = (requirement: object): Doc =>
    withDoc(minimalHf, (d) => {
      d.spec.scheduling = {
        affinity: {
          nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [requirement] } },
        },
      };
    });
  const expr =
    'spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]';
  const podTerm = (matchExpressions: object[]): Doc =>
    withDoc(minimalHf, (d) => {
      d.spec.scheduling = {
        affinity: {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { labelSelector: { matchExpressions }, topologyKey: 'kubernetes.io/hostname' },
            ],
          },
        },
      };
    });
  const podExpr =
    'spec.scheduling.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]';

  type Case = [title: string, doc: Doc, path: string, message: string];
  const cases: Case[] = [
    [
      'an unknown node affinity operator',
      nodeTerm({ matchExpressions: [{ key: 'zone', operator: 'Inn', values: ['a'] }] }),
      `${expr}.matchExpressions[0].operator`,
      'must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, got "Inn"',
    ],
    [
      'Exists with values',
      nodeTerm({ matchExpressions: [{ key: 'zone', operator: 'Exists', values: ['a'] }] }),
      `${expr}.matchExpressions[0].values`,
      'must be empty when operator is Exists',
    ],
    [
      'DoesNotExist with values',
      nodeTerm({ matchExpressions: [{ key: 'zone', operator: 'DoesNotExist', values: ['a'] }] }),
      `${expr}.matchExpressions[0].values`,
      'must be empty when operator is DoesNotExist',
    ],
    [
      'In without values',
      nodeTerm({ matchExpressions: [{ key: 'zone', operator: 'In' }] }),
      `${expr}.matchExpressions[0].values`,
      'must list at least one value when operator is In',
    ],
    [
      'NotIn with an empty list',
      nodeTerm({ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: [] }] }),
      `${expr}.matchExpressions[0].values`,
      'must list at least one value when operator is NotIn',
    ],
    [
      'Gt with a word',
      nodeTerm({ matchExpressions: [{ key: 'gpus', operator: 'Gt', values: ['many'] }] }),
      `${expr}.matchExpressions[0].values`,
      'must be one whole number when operator is Gt, like ["8"], got ["many"]',
    ],
    [
      'Lt with two numbers',
      nodeTerm({ matchExpressions: [{ key: 'gpus', operator: 'Lt', values: ['1', '2'] }] }),
      `${expr}.matchExpressions[0].values`,
      'must be one whole number when operator is Lt, like ["8"], got ["1","2"]',
    ],
    [
      'a node affinity key that is not a label key',
      nodeTerm({ matchExpressions: [{ key: 'bad key', operator: 'Exists' }] }),
      `${expr}.matchExpressions[0].key`,
      'must be a label key like topology.kubernetes.io/zone, got "bad key"',
    ],
    [
      'a node field other than metadata.name',
      nodeTerm({ matchFields: [{ key: 'spec.unschedulable', operator: 'In', values: ['x'] }] }),
      `${expr}.matchFields[0].key`,
      'must be metadata.name, got "spec.unschedulable"',
    ],
    [
      'a node field with Exists',
      nodeTerm({ matchFields: [{ key: 'metadata.name', operator: 'Exists' }] }),
      `${expr}.matchFields[0].operator`,
      'must be one of In, NotIn, got "Exists"',
    ],
    [
      'a node field with two names',
      nodeTerm({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['a', 'b'] }] }),
      `${expr}.matchFields[0].values`,
      'must be exactly one node name',
    ],
    [
      'Gt in a label selector (only node affinity has it)',
      podTerm([{ key: 'app', operator: 'Gt', values: ['1'] }]),
      `${podExpr}.operator`,
      'must be one of In, NotIn, Exists, DoesNotExist, got "Gt"',
    ],
    [
      'In without values in a label selector',
      podTerm([{ key: 'app', operator: 'In' }]),
      `${podExpr}.values`,
      'must list at least one value when operator is In',
    ],
    [
      'a lowercase toleration operator',
      withDoc(minimalHf, (d) => (d.spec.scheduling = { tolerations: [{ key: 'gpu', operator: 'exists' }] })),
      'spec.scheduling.tolerations[0].operator',
      'must be one of Exists, Equal, got "exists"',
    ],
    [
      'an unknown toleration effect',
      withDoc(
        minimalHf,
        (d) => (d.spec.scheduling = { tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedul' }] }),
      ),
      'spec.scheduling.tolerations[0].effect',
      'must be one of NoSchedule, PreferNoSchedule, NoExecute, got "NoSchedul"',
    ],
    [
      'an unknown access mode',
      withDoc(minimalHf, (d) => (d.spec.storage = { accessMode: 'ReadOnlyMany' })),
      'spec.storage.accessMode',
      'must be one of ReadWriteOnce, ReadWriteOncePod, ReadWriteMany, got "ReadOnlyMany"',
    ],
  ];

  it.each(cases)('rejects %s', (_title, doc, path, message) => {
    expect(issuesOf(doc)).toContainEqual({ path, message: expect.stringContaining(message) });
  });

  it('accepts every operator with fitting values', () => {
    const matchExpressions = [
      { key: 'zone', operator: 'In', values: ['a'] },
      { key: 'zone', operator: 'NotIn', values: ['b', 'c'] },
      { key: 'gpu', operator: 'Exists' },
      { key: 'spot', operator: 'DoesNotExist', values: [] },
      { key: 'gpus', operator: 'Gt', values: ['3'] },
      { key: 'gpus', operator: 'Lt', values: ['-1'] },
    ];
    const model = parseModelDocument(
      nodeTerm({ matchExpressions, matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['node-1'] }] }),
    );
    expect(
      model.spec.scheduling.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]
        ?.matchExpressions,
    ).toEqual(matchExpressions);
  });
});

describe('revisions', () => {
  const rejected: [revision: string, why: string][] = [
    ['../../main', 'a part of it starts with "."'],
    ['--help', 'it starts with "-", which a program reads as an option'],
    ['-x', 'it starts with "-"'],
    ['a/../b', 'a part of it starts with "."'],
    ['a..b', 'it has ".." in it'],
    ['/main', 'it starts or ends with "/", or has "//"'],
    ['main/', 'it starts or ends with "/", or has "//"'],
    ['a//b', 'it starts or ends with "/", or has "//"'],
    ['.hidden', 'a part of it starts with "."'],
    ['main.', 'ends with "." or ".lock"'],
    ['main.lock', 'ends with "." or ".lock"'],
    ['main~1', 'it may only have letters, digits, "_", "-", "." and "/"'],
    ['HEAD^', 'it may only have letters, digits'],
    ['a:b', 'it may only have letters, digits'],
    ['@{1}', 'it may only have letters, digits'],
    ['', 'it is empty'],
  ];

  const revisionIssues = (revision: string) =>
    issuesOf(withDoc(minimalHf, (d) => (d.spec.source.huggingface.revision = revision)));

  it.each(rejected)('rejects %j', (revision, why) => {
    const issues = revisionIssues(revision);
    expect(issues).toEqual([
      {
        path: 'spec.source.huggingface.revision',
        message: expect.stringMatching(/^must be a branch, tag or commit of the repository \(like main, v1\.2/),
      },
    ]);
    expect(issues[0]?.message).toContain(why);
  });

  it('rejects one longer than 255 characters', () => {
    expect(revisionIssues('a'.repeat(256))[0]?.message).toMatch(
      / \(256 characters\): it is longer than 255 characters$/,
    );
  });

  it.each(['main', 'v1.2', 'refs/pr/1', 'a09a35458c702b33eeacc393d103063234e8bc28', 'release/2024-06_rc1'])(
    'accepts %j',
    (revision) => {
      const model = parseModelDocument(withDoc(minimalHf, (d) => (d.spec.source.huggingface.revision = revision)));
      expect(model.spec.source.huggingface?.revision).toBe(revision);
    },
  );
});

describe('YAML that is not plain data, or too much of it', () => {
  const base = minimalYaml;

  it.each([
    ['!!set', 'metadata:\n  name: qwen\n  labels: !!set {team, ml}\n', 'line 3, column 11', 'tag:yaml.org,2002:set'],
    ['!!omap', 'spec: !!omap [ {a: 1} ]\n', 'line 1, column 7', 'tag:yaml.org,2002:omap'],
    ['!!binary', 'kind: !!binary U2VydmVkTW9kZWw=\n', 'line 1, column 7', 'tag:yaml.org,2002:binary'],
    ['!!timestamp', 'kind: !!timestamp 2001-12-14\n', 'line 1, column 7', 'tag:yaml.org,2002:timestamp'],
    ['a local tag', 'kind: !ServedModel x\n', 'line 1, column 7', 'Unresolved tag: !ServedModel'],
    ['!!set under %YAML 1.1', '%YAML 1.1\n---\nkind: !!set {a}\n', 'line 3, column 7', 'tag:yaml.org,2002:set'],
  ])('rejects %s', (_title, text, path, message) => {
    const issues = yamlIssuesOf(text);
    expect(issues).toContainEqual({ path, message: expect.stringContaining(message) });
    expect(issues[0]?.message).toContain('a ServedModel is plain YAML');
  });

  it("reads the core schema's own tags, and a closing bracket under its key", () => {
    expect(
      parseModelYaml("a: !!str 123\nb: !!int 7\nc: !!map {x: 1}\nd: !!seq [1]\ne: !!null ''\nf: [\n  1\n]\n"),
    ).toEqual({ a: '123', b: 7, c: { x: 1 }, d: [1], e: null, f: [1] });
  });

  it('reads dates and merge keys as plain strings and keys under %YAML 1.1', () => {
    expect(parseModelYaml('%YAML 1.1\n---\na: 2001-12-14\n<<: {b: 1}\n')).toEqual({ a: '2001-12-14', '<<': { b: 1 } });
  });

  it('rejects an alias without its anchor, where it is', () => {
    expect(yamlIssuesOf(`${base}extra: *nowhere\n`)).toEqual([
      { path: 'line 9, column 8', message: 'the alias *nowhere has no anchor &nowhere before it' },
    ]);
  });

  it('rejects an alias bomb (billion laughs) quickly', () => {
    const lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (const [name, previous] of [...'bcdefghi'].map((c, i) => [c, 'abcdefgh'[i]!])) {
      lines.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`);
    }
    const { value: issues, ms } = timed(() => yamlIssuesOf(lines.join('\n')));
    expect(issues).toEqual([
      {
        path: '(document)',
        message: 'cannot be read: Excessive alias count indicates a resource exhaustion attack',
      },
    ]);
    expect(ms).toBeLessThan(100);
  });

  it('rejects an alias inside its own anchor as a cycle', () => {
    expect(yamlIssuesOf('a: &x [1, *x]\n')).toContainEqual({
      path: 'a[1]',
      message: 'contains itself: a document is a tree of values, without cycles',
    });
  });

  it('rejects a key given twice and a key that is a list', () => {
    expect(yamlIssuesOf(`${base}kind: ServedModel\n`)).toEqual([
      { path: 'line 9, column 1', message: 'the key "kind" is given twice' },
    ]);
    expect(yamlIssuesOf('? [a, b]\n: 1\n')).toEqual([
      { path: 'line 1, column 3', message: 'a key must be a plain value, not a list, mapping or alias' },
    ]);
  });

  it('rejects text over the size limit before parsing it', () => {
    const text = `${base}# ${'x'.repeat(DOCUMENT_LIMITS.characters)}\n`;
    const { value: issues, ms } = timed(() => yamlIssuesOf(text));
    expect(issues).toEqual([
      {
        path: '(document)',
        message: `is too large: ${text.length} characters, a ServedModel document is at most 262144 (256 KiB)`,
      },
    ]);
    expect(ms).toBeLessThan(100);
  });

  it('rejects more values than the limit before parsing them', () => {
    const text = `${base}extra: [${Array(DOCUMENT_LIMITS.values).fill('1').join(',')}]\n`;
    expect(yamlIssuesOf(text)).toEqual([
      { path: '(document)', message: 'is too large: more than 1000 values (one with every field set has about 150)' },
    ]);
  });

  it.each([
    ['flow lists', '['.repeat(200_000), 'line 1, column 65'],
    ['flow mappings', '{a: '.repeat(60_000), 'line 1, column 257'],
    ['compact block lists', `${'- '.repeat(120_000)}x`, 'line 1, column 131'],
    ['indentation', Array.from({ length: 700 }, (_, i) => `${' '.repeat(i)}a:\n`).join(''), 'line 66, column 66'],
  ])('rejects %s nested without end in well under 100 ms', (_title, text, path) => {
    const { value: issues, ms } = timed(() => yamlIssuesOf(text));
    expect(issues).toEqual([{ path, message: 'nests lists and mappings more than 64 levels deep' }]);
    expect(ms).toBeLessThan(50);
  });

  it('rejects 65 levels with the path of the first one too deep, and takes 64', () => {
    const nested = (depth: number) => `${base}  extra: ${'['.repeat(depth)}${']'.repeat(depth)}\n`;
    // The document is level 1 and spec level 2: the lists start at level 3.
    const issues = yamlIssuesOf(nested(63));
    expect(issues).toContainEqual({
      path: `spec.extra${'[0]'.repeat(62)}`,
      message: 'nests lists and mappings more than 64 levels deep',
    });
    expect(yamlIssuesOf(nested(62))).toEqual([
      { path: 'spec.extra', message: expect.stringContaining('unknown field') },
    ]);
  });

  it('parses the examples', () => {
    expect(parseModelDocument(parseModelYaml(exampleText('qwen.yaml'))).metadata.name).toBe('qwen');
    expect(parseModelDocument(parseModelYaml(exampleText('qwen-full.yaml'))).metadata.name).toBe('qwen-chat');
  });
});

describe('documents given as objects', () => {
  it('rejects 500,000 levels of nesting in well under 100 ms', () => {
    const root: Doc = {};
    let node = root;
    for (let i = 0; i < 500_000; i++) node = node.a = {};
    const doc = withDoc(minimalHf, (d) => (d.spec.engine = {}));
    doc.spec.engine.lora = root;
    const { value: issues, ms } = timed(() => issuesOf(doc));
    expect(issues).toEqual([
      {
        path: expect.stringMatching(/^spec\.engine\.lora(\.a)+$/),
        message: 'nests lists and mappings more than 64 levels deep',
      },
    ]);
    // spec, engine, lora (level 4), then `a` down to level 65.
    expect(issues[0]!.path.split('.')).toHaveLength(64);
    expect(ms).toBeLessThan(50);
  });

  it('rejects a cycle', () => {
    const doc = clone(minimalHf) as Doc;
    doc.spec.engine = { args: [] };
    doc.spec.engine.args.push(doc.spec.engine.args);
    expect(issuesOf(doc)).toEqual([
      { path: 'spec.engine.args[0]', message: 'contains itself: a document is a tree of values, without cycles' },
    ]);
  });

  it.each([
    ['a Set', new Set(['a'])],
    ['a Map', new Map([['team', 'a']])],
    ['a Date', new Date(0)],
    ['a Uint8Array', new Uint8Array(2)],
    ['an instance of a class', new (class Labels {})()],
  ])('rejects %s', (kind, value) => {
    expect(issuesOf(withDoc(minimalHf, (d) => (d.metadata.labels = value)))).toEqual([
      {
        path: 'metadata.labels',
        message: `must be plain data (a string, number, boolean, null, list or mapping), got ${kind}`,
      },
    ]);
  });

  it('rejects a function and a bigint', () => {
    expect(issuesOf(withDoc(minimalHf, (d) => (d.spec.replicas = 1n)))[0]?.message).toMatch(/got a bigint$/);
    expect(issuesOf(withDoc(minimalHf, (d) => (d.spec.replicas = () => 1)))[0]?.message).toMatch(/got a function$/);
  });

  it('rejects too many values and too many characters', () => {
    const many = withDoc(minimalHf, (d) => (d.spec.engine = { args: Array(100_000).fill('--x') }));
    expect(issuesOf(many)).toEqual([
      { path: '(document)', message: 'is too large: more than 1000 values (one with every field set has about 150)' },
    ]);
    const long = withDoc(minimalHf, (d) => (d.spec.engine = { args: Array(10).fill('x'.repeat(30_000)) }));
    expect(issuesOf(long)).toEqual([
      { path: '(document)', message: 'is too large: its strings add up to more than 262144 characters (256 KiB)' },
    ]);
  });

  it('keeps a "__proto__" key a key', () => {
    const doc = JSON.parse(
      '{"apiVersion":"ferry.dev/v1alpha1","kind":"ServedModel","metadata":{"name":"q","__proto__":{"x":1}},"spec":{"source":{"huggingface":{"repo":"a/b"}}}}',
    );
    expect(issuesOf(doc)).toEqual([
      { path: 'metadata.__proto__', message: 'unknown field; fields allowed here: name, namespace, labels' },
    ]);
  });
});

describe('messages stay short', () => {
  it('shows a huge value by its start and its length', () => {
    const issues = issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { image: 'a'.repeat(5 * 1024 * 1024) })));
    expect(issues).toEqual([
      {
        path: 'spec.engine.image',
        message: `is too long: "${'a'.repeat(40)}…" (5242880 characters); a ServedModel document is at most 262144 characters (256 KiB)`,
      },
    ]);
  });

  it('clips values echoed by the field rules', () => {
    const image = `bad image ${'x'.repeat(20_000)}`;
    expect(issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { image })))).toEqual([
      {
        path: 'spec.engine.image',
        message: `must be a container image like vllm/vllm-openai:v0.32.0, got "bad image ${'x'.repeat(30)}…" (20010 characters)`,
      },
    ]);
  });

  it('clips long keys in paths', () => {
    const [issue] = issuesOf(withDoc(minimalHf, (d) => (d.spec.engine = { ['k'.repeat(100_000)]: 1 })));
    expect(issue?.path).toBe(`spec.engine["${'k'.repeat(40)}…" (100000 characters)]`);
    expect(issue?.message).toBe(
      'unknown field; fields allowed here: image, servedModelName, port, args, env, apiKeySecret, lora, startupTimeout',
    );
  });

  it('lists 20 problems, then how many more', () => {
    const error = rejection(() =>
      parseModelDocument(withDoc(minimalHf, (d) => (d.spec.engine = { args: Array(100).fill('--port=1') }))),
    );
    expect(error.issues).toHaveLength(100);
    const lines = error.message.split('\n');
    expect(lines[0]).toBe('invalid ServedModel (100 problems):');
    expect(lines.slice(1, 21)).toEqual(
      Array.from({ length: 20 }, (_, i) => `  spec.engine.args[${i}]: --port is set by Ferry; use engine.port`),
    );
    expect(lines.slice(21)).toEqual(['  … and 80 more']);
  });

  it('keeps every issue under 1 KB', () => {
    const doc = withDoc(fullHf, (d) => {
      d.spec.engine.image = `a b${'\u202e'.repeat(10_000)}`;
      d.metadata.labels = { [`${'x'.repeat(60)}/${'y'.repeat(60)}`]: 'z'.repeat(100) };
      d.spec.source.huggingface.revision = `-${'r'.repeat(10_000)}`;
      // 60 levels of 40-character keys of 3 bytes each, down to a string with a control character.
      let node: Doc = (d.spec.engine.lora = {});
      for (let i = 0; i < 60; i++) node = node['世界'.repeat(20)] = {};
      node.x = `${'世'.repeat(300)}\u0000`;
    });
    for (const issue of issuesOf(doc)) {
      expect(new TextEncoder().encode(`${issue.path}: ${issue.message}`).length).toBeLessThan(1024);
    }
  });
});
