// The documents of -f (several per file, directories, stdin, -n), --request-timeout's parsing, and ferry diff's
// pure parts: the unified diff and what it compares. Nothing here reaches a server: the address is one nothing
// listens on, so a command that tried to connect would exit 5, not what these tests expect.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { runCli } from '../../client/cli.js';
import { parseCommand, sendsEarly } from '../../client/cli/args.js';
import { modelDiff } from '../../client/cli/diff.js';
import type { CliIO } from '../../client/cli/io.js';
import { splitYamlStream } from '../../client/cli/read-document.js';
import { unifiedDiff } from '../../client/cli/unified-diff.js';
import { parseServedModel } from '../../workflows/contract/index.js';
import { usageOf } from '../support/usage.js';

const usage = usageOf;

const model = (name: string, extra = '') =>
  [
    'apiVersion: ferry.dev/v1alpha1',
    'kind: ServedModel',
    `metadata: { name: ${name}${extra} }`,
    'spec:',
    '  source: { huggingface: { repo: Qwen/Qwen2.5-0.5B-Instruct } }',
  ].join('\n');

function fakeIO(files: Record<string, string> = {}, stdin = ''): CliIO & { out: string; err: string } {
  const cwd = mkdtempSync(join(tmpdir(), 'ferry-docs-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(cwd, name, '..'), { recursive: true });
    writeFileSync(join(cwd, name), text);
  }
  const io = {
    out: '',
    err: '',
    stdout: { write: (text: string) => (io.out += text) },
    stderr: { write: (text: string) => (io.err += text) },
    stdin: (async function* () {
      yield Buffer.from(stdin);
    })(),
    env: { TEMPORAL_ADDRESS: '127.0.0.1:9', FERRY_LOCAL_ENV: join(cwd, 'missing.env') },
    cwd,
    now: () => new Date('2026-01-01T00:00:00Z'),
    signal: new AbortController().signal,
  };
  return io;
}

/** The `Kind/name` of each object a dry run printed. */
const printedObjects = (out: string) =>
  parseAllDocuments(out)
    .map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace: string } })
    .map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`);

describe('parsing -f, -n and --request-timeout', () => {
  it('takes -f more than once, in order, and -n on serve, update, apply, diff and delete -f', () => {
    expect(parseCommand(['apply', '-f', 'a.yaml', '-f', 'dir', '--file=-', '-n', 'team'])).toMatchObject({
      kind: 'apply',
      files: ['a.yaml', 'dir', '-'],
      namespace: 'team',
    });
    expect(parseCommand(['diff', '-f', 'a.yaml'])).toEqual({
      kind: 'diff',
      files: ['a.yaml'],
      output: 'text',
      temporal: {},
    });
    expect(parseCommand(['delete', '-f', 'a.yaml', '--wait', '-n', 'team'])).toMatchObject({
      kind: 'delete',
      files: ['a.yaml'],
      namespace: 'team',
      wait: true,
    });
    expect(usage(['serve', '-f', '-', '-f', '-'])).toBe('stdin (-f -) can be read only once');
    expect(usage(['serve', '-f', 'a.yaml', '-n', 'Team'])).toMatch(/^namespace must be a DNS label/);
    expect(usage(['diff'])).toMatch(/^-f FILE is required/);
    expect(usage(['diff', '-f', 'a.yaml', '-o', 'json'])).toBe('diff prints unified diffs: drop -o');
    expect(usage(['delete', 'qwen', '-f', 'a.yaml'])).toBe('name the models either by NAME or by -f FILE, not both');
    expect(usage(['delete', '-f', 'a.yaml', '--cluster', 'c'])).toMatch(/documents name their cluster/);
  });

  it('takes --request-timeout on every command that talks to Temporal; 0 is no bound; it sends nothing early', () => {
    expect(parseCommand(['list', '--request-timeout', '10s'])).toMatchObject({ requestTimeoutMs: 10_000 });
    expect(parseCommand(['status', 'qwen', '--request-timeout', '1m30s'])).toMatchObject({ requestTimeoutMs: 90_000 });
    expect(parseCommand(['list', '--request-timeout', '0'])).not.toHaveProperty('requestTimeoutMs');
    expect(parseCommand(['list', '--request-timeout', '0s'])).not.toHaveProperty('requestTimeoutMs');
    expect(usage(['list', '--request-timeout', 'soon'])).toMatch(/^--request-timeout must be a duration like 10s/);
    expect(sendsEarly(parseCommand(['update', '-f', 'm.yaml']))).toBe(true);
    expect(sendsEarly(parseCommand(['update', '-f', 'm.yaml', '--request-timeout', '5s']))).toBe(false);
    expect(sendsEarly(parseCommand(['delete', 'q', '--cluster', 'c', '--request-timeout', '5s']))).toBe(false);
    expect(sendsEarly(parseCommand(['delete', '-f', 'm.yaml']))).toBe(false);
  });
});

describe('splitYamlStream', () => {
  it('splits at --- lines as kubectl does, skips empty documents, and says where each starts', () => {
    const text = ['# models', '---', 'a: 1', '--- # second', 'b: 2', '---', '# nothing', '', '---', 'c: 3', ''];
    expect(splitYamlStream(text.join('\n'))).toEqual([
      { text: 'a: 1', line: 3 },
      { text: 'b: 2', line: 5 },
      { text: 'c: 3\n', line: 10 },
    ]);
    // A --- with content after it, or inside a block, is not a separator.
    expect(splitYamlStream('a: |\n  ---x\n---x: 1\n')).toHaveLength(1);
    expect(splitYamlStream('\n# only a comment\n')).toEqual([]);
  });
});

describe('documents of -f, read before anything is sent', () => {
  it('dry-runs every document of a stream, a directory (sorted, not recursive) and stdin, in order', async () => {
    const io = fakeIO(
      {
        'stream.yaml': `${model('a')}\n---\n---\n${model('b')}\n`,
        'dir/2.yml': model('d'),
        'dir/1.json': JSON.stringify(parseAllDocuments(model('c'))[0]!.toJS()),
        'dir/notes.txt': 'not a model',
        'dir/sub/e.yaml': model('e'),
      },
      model('f'),
    );
    const argv = ['apply', '-f', 'stream.yaml', '-f', 'dir', '-f', '-', '-n', 'team', '--dry-run=client'];
    expect(await runCli(argv, io)).toBe(0);
    expect(io.err).toBe('');
    expect(io.out).toMatch(
      /^# ferry apply --dry-run=client: the documents are valid; .* for team\/a, team\/b, team\/c, team\/d, team\/f\n/,
    );
    const roots = printedObjects(io.out).filter((o) => o.startsWith('ConfigMap/') && o.endsWith('-ferry'));
    expect(roots).toEqual(['a', 'b', 'c', 'd', 'f'].map((n) => `ConfigMap/team/${n}-ferry`));
  });

  it('prints one JSON List of every object with -o json', async () => {
    const io = fakeIO({ 'two.yaml': `${model('a')}\n---\n${model('b')}` });
    expect(await runCli(['serve', '-f', 'two.yaml', '--dry-run=client', '-o', 'json'], io)).toBe(0);
    const list = JSON.parse(io.out) as { kind: string; items: { kind: string; metadata: { name: string } }[] };
    expect(list.kind).toBe('List');
    expect(list.items.filter((o) => o.kind === 'Deployment').map((o) => o.metadata.name)).toEqual(['a', 'b']);
  });

  it('names every bad document with its file and index, and sends nothing (exit 2, not 5)', async () => {
    const io = fakeIO({
      'models.yaml': `${model('good')}\n---\n${model('Bad_Name')}\n---\n${model('other', ', namespace: prod')}\n`,
      'broken.yaml': 'metadata:\n  name: [x\n',
    });
    const code = await runCli(
      ['serve', '-f', 'models.yaml', '-f', 'broken.yaml', '-f', 'missing.yaml', '-n', 'team'],
      io,
    );
    expect(code).toBe(2);
    expect(io.out).toBe('');
    const err = io.err.trimEnd().split('\n');
    expect(err).toEqual([
      'error: invalid ServedModel in models.yaml (document 2) (1 problem):',
      expect.stringMatching(/^ {2}metadata\.name: must be a DNS-1035 label/),
      'error: invalid ServedModel in models.yaml (document 3) (1 problem):',
      '  metadata.namespace: the namespace of the document, "prod", does not match the namespace given with -n, "team": drop -n, or give -n prod',
      'error: invalid ServedModel in broken.yaml (1 problem):',
      // The line numbers are the file's.
      expect.stringMatching(/^ {2}line 3, column 1: /),
      'error: cannot read missing.yaml: no such file',
    ]);
  });

  it('counts lines from the start of the file in a stream', async () => {
    const io = fakeIO({ 'two.yaml': `${model('a')}\n---\nmetadata:\n  name: [x\n` });
    expect(await runCli(['serve', '-f', 'two.yaml', '--dry-run=client'], io)).toBe(2);
    expect(io.err).toMatch(
      /^error: invalid ServedModel in two\.yaml \(document 2\) \(\d problems?\):\n {2}line 9, column \d+: /,
    );
  });

  it('says what is wrong with a directory without documents, and an empty file as before', async () => {
    const io = fakeIO({ 'empty/readme.md': '# no models', 'blank.yaml': '# nothing\n' });
    expect(await runCli(['apply', '-f', 'empty', '-f', 'blank.yaml', '--dry-run=client'], io)).toBe(2);
    expect(io.err).toBe(
      [
        'error: no .yaml, .yml or .json files in the directory empty',
        'error: invalid ServedModel in blank.yaml (1 problem):',
        '  (document): is empty: expected one ServedModel document',
        '',
      ].join('\n'),
    );
  });
});

describe('unifiedDiff', () => {
  it('prints nothing for the same text', () => {
    expect(unifiedDiff('a\nb\n', 'a\nb\n', 'old', 'new')).toBe('');
  });

  it('prints hunks with three lines of context, as diff -u', () => {
    const before = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', ''].join('\n');
    const after = before.replace('2\n', 'two\n').replace('14\n', '14\n14.5\n');
    expect(unifiedDiff(before, after, 'a', 'b')).toBe(
      [
        '--- a',
        '+++ b',
        '@@ -1,5 +1,5 @@',
        ' 1',
        '-2',
        '+two',
        ' 3',
        ' 4',
        ' 5',
        '@@ -12,4 +12,5 @@',
        ' 12',
        ' 13',
        ' 14',
        '+14.5',
        ' 15',
        '',
      ].join('\n'),
    );
  });

  it('joins changes closer than twice the context into one hunk', () => {
    const before = 'a\nb\nc\nd\ne\nf\ng\nh\n';
    const after = 'A\nb\nc\nd\ne\nf\ng\nH\n';
    expect(unifiedDiff(before, after, 'x', 'y').match(/^@@/gm)).toHaveLength(1);
    expect(unifiedDiff(before, after, 'x', 'y')).toContain('@@ -1,8 +1,8 @@\n-a\n+A\n');
  });

  it('names an empty side as line 0', () => {
    expect(unifiedDiff('', 'a\nb\n', '/dev/null', 'new')).toBe('--- /dev/null\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n');
    expect(unifiedDiff('a\n', '', 'old', '/dev/null')).toBe('--- old\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-a\n');
  });
});

describe('modelDiff', () => {
  const served = (replicas: number, repo = 'Qwen/Qwen2.5-0.5B-Instruct') =>
    parseServedModel({
      apiVersion: 'ferry.dev/v1alpha1',
      kind: 'ServedModel',
      metadata: { name: 'qwen', namespace: 'models' },
      spec: { replicas, source: { huggingface: { repo } } },
    });

  it('is empty when the running spec is the document', () => {
    expect(modelDiff(served(1), served(1), 'qwen.yaml')).toBe('');
  });

  it('shows every line as new for a model not served', () => {
    const text = modelDiff(undefined, served(1), 'qwen.yaml');
    expect(text).toMatch(/^--- \/dev\/null\n\+\+\+ ServedModel models\/qwen \(qwen\.yaml\)\n@@ -0,0 \+1,\d+ @@\n/);
    expect(text).toContain('+++ Deployment models/qwen (qwen.yaml)\n');
    expect(text.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---'))).toEqual([]);
  });

  it('shows the spec and the objects that change; a new source replaces the pull Job', () => {
    const replicas = modelDiff(served(1), served(2), 'qwen.yaml');
    expect(replicas).toContain('--- ServedModel models/qwen (running)\n+++ ServedModel models/qwen (qwen.yaml)\n');
    expect(replicas).toMatch(/^- {2}replicas: 1\n\+ {2}replicas: 2$/m);
    expect(replicas).toContain('--- Deployment models/qwen (running)\n');
    expect(replicas).not.toContain('Service models/qwen');

    const source = modelDiff(served(1), served(1, 'Qwen/Qwen2.5-1.5B-Instruct'), 'qwen.yaml');
    expect(source).toMatch(/^--- Job models\/qwen-pull-[0-9a-f]{8} \(running\)\n\+\+\+ \/dev\/null$/m);
    expect(source).toMatch(/^--- \/dev\/null\n\+\+\+ Job models\/qwen-pull-[0-9a-f]{8} \(qwen\.yaml\)$/m);
  });
});
