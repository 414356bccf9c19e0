import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { buildAll, objectList } from '../../activities/builders/index.js';
import { parseServedModel } from '../../workflows/contract/index.js';
import { parseCommand, sendsEarly, UsageError } from '../../client/cli/args.js';
import { repoRoot } from '../support/local-env.js';
import { runCli } from '../../client/cli.js';
import { CLEAR_LINE, safeText, terminalSafe, type CliIO } from '../../client/cli/io.js';

const parseError = (argv: string[]): UsageError => {
  try {
    parseCommand(argv);
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error(`parsed without error: ${argv.join(' ')}`);
};

describe('parseCommand', () => {
  it('parses serve with a file, --wait and a timeout', () => {
    expect(parseCommand(['serve', '-f', 'model.yaml', '--wait', '--timeout', '45m'])).toEqual({
      kind: 'serve',
      files: ['model.yaml'],
      wait: true,
      timeoutMs: 45 * 60_000,
      output: 'text',
      temporal: {},
    });
    expect(parseCommand(['serve', '--file=-', '-o', 'json'])).toMatchObject({
      kind: 'serve',
      files: ['-'],
      wait: false,
      output: 'json',
    });
  });

  it('parses update and apply like serve', () => {
    expect(parseCommand(['update', '-f', 'm.yaml', '--wait'])).toMatchObject({
      kind: 'update',
      files: ['m.yaml'],
      wait: true,
    });
    expect(parseCommand(['apply', '-f', 'm.yaml', '--timeout', '5m', '-o', 'json'])).toMatchObject({
      kind: 'apply',
      files: ['m.yaml'],
      wait: false,
      timeoutMs: 5 * 60_000,
      output: 'json',
    });
    expect(() => parseCommand(['apply'])).toThrow(/-f FILE is required/);
  });

  it('takes --dry-run=client and --dry-run=server on serve, update and apply, and sends no update early with them', () => {
    for (const kind of ['serve', 'update', 'apply'] as const) {
      for (const dryRun of ['client', 'server'] as const) {
        const command = parseCommand([kind, '-f', 'm.yaml', `--dry-run=${dryRun}`]);
        expect(command).toMatchObject({ kind, files: ['m.yaml'], dryRun, wait: false });
        expect(sendsEarly(command)).toBe(false);
      }
    }
    expect(sendsEarly(parseCommand(['update', '-f', 'm.yaml']))).toBe(true);
    expect(parseCommand(['serve', '-f', 'm.yaml'])).not.toHaveProperty('dryRun');
    expect(parseError(['serve', '-f', 'm.yaml', '--dry-run=none']).message).toMatch(
      /^--dry-run must be client \(.*\) or server \(.*worker of the model's cluster.*\), got "none"$/,
    );
    expect(parseError(['serve', '-f', 'm.yaml', '--dry-run=client', '--wait']).message).toMatch(
      /^--dry-run=client creates nothing to wait for: drop --wait$/,
    );
    expect(parseError(['apply', '-f', 'm.yaml', '--dry-run=server', '--wait']).message).toMatch(
      /^--dry-run=server creates nothing/,
    );
    expect(parseError(['status', 'qwen', '--dry-run=client']).message).toMatch(/Unknown option '--dry-run'/);
  });

  it('reads --dry-run alone as --dry-run=client, as kubectl does, and a value after a space as its value', () => {
    expect(parseCommand(['serve', '-f', 'm.yaml', '--dry-run'])).toMatchObject({ dryRun: 'client', files: ['m.yaml'] });
    expect(parseCommand(['serve', '--dry-run', '-f', 'm.yaml'])).toMatchObject({ dryRun: 'client', files: ['m.yaml'] });
    expect(parseCommand(['apply', '--dry-run', 'server', '-f', 'm.yaml'])).toMatchObject({ dryRun: 'server' });
    expect(parseCommand(['update', '--dry-run', '-o', 'json', '-f', 'm.yaml'])).toMatchObject({
      dryRun: 'client',
      output: 'json',
    });
    // Only the flag itself: a file named --dry-run is still a file.
    expect(parseCommand(['serve', '--file=--dry-run'])).toMatchObject({ files: ['--dry-run'] });
    expect(parseCommand(['serve', '-f', 'm.yaml'])).not.toHaveProperty('dryRun');
  });

  it('names a model by NAME, -n and --cluster; the namespace defaults to default and the cluster is left to resolve', () => {
    expect(parseCommand(['status', 'qwen'])).toMatchObject({
      kind: 'status',
      ref: { name: 'qwen', namespace: 'default' },
    });
    expect(parseCommand(['status', 'qwen'])).not.toHaveProperty('ref.cluster');
    expect(parseCommand(['status', 'qwen', '-n', 'models', '--cluster', 'gpu-east', '-o', 'json'])).toMatchObject({
      kind: 'status',
      ref: { name: 'qwen', namespace: 'models', cluster: 'gpu-east' },
      output: 'json',
    });
    expect(parseCommand(['watch', 'qwen', '--namespace=models'])).toMatchObject({
      kind: 'watch',
      ref: { namespace: 'models' },
    });
    expect(parseCommand(['delete', 'qwen', '-n', 'models', '--wait', '--reason', 'eval done'])).toMatchObject({
      kind: 'delete',
      wait: true,
      reason: 'eval done',
    });
  });

  it('parses list filters; phases are case-insensitive and comma-separated', () => {
    expect(parseCommand(['list', '--phase', 'ready,Degraded', '-n', 'models', '--cluster', 'c1'])).toMatchObject({
      phases: ['Ready', 'Degraded'],
      namespace: 'models',
      cluster: 'c1',
    });
  });

  it('lists one namespace as kubectl does: default without -n, every one with -A, deleted models on request', () => {
    // Without flags: the namespace every other command means without -n, running models only.
    expect(parseCommand(['list'])).toEqual({
      kind: 'list',
      phases: [],
      namespace: 'default',
      includeDeleted: false,
      output: 'text',
      temporal: {},
    });
    expect(parseCommand(['list', '-n', 'models'])).toMatchObject({ namespace: 'models', includeDeleted: false });
    expect(parseCommand(['list', '--namespace=models'])).toMatchObject({ namespace: 'models' });
    // -A and --all-namespaces: no namespace at all, so every one.
    for (const argv of [
      ['list', '-A'],
      ['list', '--all-namespaces'],
    ]) {
      const cmd = parseCommand(argv);
      expect(cmd, argv.join(' ')).toMatchObject({ kind: 'list', includeDeleted: false });
      expect(cmd, argv.join(' ')).not.toHaveProperty('namespace');
    }
    // -A wins over -n, as kubectl's does (silently); the namespace must still be one.
    expect(parseCommand(['list', '-n', 'models', '-A'])).not.toHaveProperty('namespace');
    expect(parseCommand(['list', '-A', '--namespace', 'models'])).not.toHaveProperty('namespace');
    expect(parseError(['list', '-A', '-n', 'My NS']).message).toMatch(/namespace must be a DNS label/);
    // Deleted models only with --include-deleted, in one namespace or in all of them.
    expect(parseCommand(['list', '--include-deleted'])).toMatchObject({ namespace: 'default', includeDeleted: true });
    const everything = parseCommand(['list', '-A', '--include-deleted', '-o', 'json']);
    expect(everything).toMatchObject({ includeDeleted: true, output: 'json' });
    expect(everything).not.toHaveProperty('namespace');
  });

  it('says what the old list --all became, and treats -A as the namespaces flag on list only', () => {
    const message = '--all is now --include-deleted (deleted models); -A/--all-namespaces lists every namespace';
    for (const argv of [
      ['list', '--all'],
      ['list', '-n', 'models', '--all'],
      ['list', '--all=true'],
    ]) {
      const err = parseError(argv);
      expect(err.message, argv.join(' ')).toBe(message);
      expect(err.command).toBe('list');
    }
    expect(parseError(['list', '--include-delted']).message).toMatch(/did you mean --include-deleted\?$/);
    expect(parseError(['list', '--all-namespace']).message).toMatch(/did you mean --all-namespaces\?$/);
    expect(parseError(['status', 'qwen', '-A']).message).toMatch(/^Unknown option '-A'/);
  });

  it('takes Temporal connection flags on every command', () => {
    const argv = ['list', '--temporal-address', 'temporal:7233', '--temporal-namespace', 'ml', '--profile', 'prod'];
    expect(parseCommand(argv)).toMatchObject({
      temporal: { address: 'temporal:7233', namespace: 'ml', profile: 'prod' },
    });
  });

  it('answers help for the tool and for each command', () => {
    expect(parseCommand(['--help'])).toEqual({ kind: 'help' });
    expect(parseCommand(['-h'])).toEqual({ kind: 'help' });
    expect(parseCommand(['help', 'serve'])).toEqual({ kind: 'help', topic: 'serve' });
    expect(parseCommand(['status', '--help'])).toEqual({ kind: 'help', topic: 'status' });
    // Help wins over missing arguments.
    expect(parseCommand(['serve', '-h'])).toEqual({ kind: 'help', topic: 'serve' });
  });

  it('answers --version and -V before a command, and not as an option of one', () => {
    expect(parseCommand(['--version'])).toEqual({ kind: 'version' });
    expect(parseCommand(['-V'])).toEqual({ kind: 'version' });
    expect(parseError(['status', 'qwen', '--version']).message).toMatch(/Unknown option '--version'/);
  });

  it('accepts a model name only when it is a DNS label', () => {
    const accepts = (word: string) => {
      try {
        return parseCommand(['status', word]).kind === 'status';
      } catch {
        return false;
      }
    };
    for (const word of ['qwen', 'q', '0', '7b', 'qwen-7b', 'a--b']) expect(accepts(word), word).toBe(true);
    for (const word of ['Qwen', 'qwen_7b', 'qwen-', '-q', 'q.w', 'q w', 'ü', 'a'.repeat(64)]) {
      expect(accepts(word), word).toBe(false);
    }
  });

  it('suggests the nearest command or flag for a typo, and nothing for what is not near', () => {
    expect(parseError(['lsit']).message).toBe(
      'unknown command "lsit"; did you mean list? commands: serve, update, apply, status, list, delete, diff, watch, rollout, move, explain, completion',
    );
    expect(parseError(['serve', '-f', 'm.yaml', '--wiat']).message).toBe(
      "Unknown option '--wiat'; did you mean --wait?",
    );
    expect(parseError(['status', 'qwen', '--namspace', 'models']).message).toMatch(/did you mean --namespace\?$/);
    expect(parseError(['delete', 'qwen', '--reas=x']).message).toMatch(/did you mean --reason\?$/);
    expect(parseError(['serve', '-f', 'm.yaml', '--bogus']).message).toBe("Unknown option '--bogus'");
    expect(parseError(['launch']).message).not.toMatch(/did you mean/);
  });

  it('rejects bad usage with a message that says what is expected', () => {
    expect(parseError([]).message).toBe('no command given');
    expect(parseError(['launch']).message).toMatch(/unknown command "launch"; commands: serve, update/);
    expect(parseError(['--wait']).message).toMatch(/a command comes first/);
    expect(parseError(['serve']).message).toMatch(/-f FILE is required/);
    expect(parseError(['serve', 'model.yaml']).message).toMatch(/unexpected argument "model.yaml": -f FILE/);
    expect(parseError(['serve', '-f', 'm.yaml', '--timeout', 'soon']).message).toMatch(/--timeout must be a duration/);
    expect(parseError(['serve', '-f', 'm.yaml', '--bogus']).message).toMatch(/Unknown option '--bogus'/);
    expect(parseError(['status']).message).toMatch(/NAME is required/);
    expect(parseError(['status', 'a', 'b']).message).toMatch(/one NAME only/);
    expect(parseError(['status', 'Qwen_7B']).message).toMatch(/NAME must be a DNS label/);
    expect(parseError(['status', 'qwen', '-n', 'My NS']).message).toMatch(/namespace must be a DNS label/);
    expect(parseError(['list', '--phase', 'Running']).message).toMatch(
      /--phase must be one of Pending, .*got "Running"/,
    );
    expect(parseError(['list', '-o', 'xml']).message).toBe('-o must be json, yaml, name, text or wide, got "xml"');
    expect(parseError(['watch', 'qwen', '-o', 'name']).message).toBe('-o must be json, yaml, text or wide, got "name"');
    expect(parseCommand(['status', 'qwen', '-o', 'yaml'])).toMatchObject({ output: 'yaml' });
    expect(parseCommand(['list', '-o', 'name'])).toMatchObject({ output: 'name' });
    expect(parseError(['status', 'qwen', '--wait']).command).toBe('status');
  });
});

/** I/O that records what the CLI writes; nothing here reaches a server. */
function fakeIO(files: Record<string, string> = {}, stdin: Buffer[] = []): CliIO & { out: string; err: string } {
  const cwd = mkdtempSync(join(tmpdir(), 'ferry-cli-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(cwd, name), text);
  const io = {
    out: '',
    err: '',
    stdout: { write: (text: string) => (io.out += text) },
    stderr: { write: (text: string) => (io.err += text) },
    stdin: (async function* () {
      yield* stdin;
    })(),
    // An address nothing listens on: any attempt to connect would fail with exit code 5, not 2.
    env: { TEMPORAL_ADDRESS: '127.0.0.1:9', FERRY_LOCAL_ENV: join(cwd, 'missing.env') },
    cwd,
    now: () => new Date('2026-01-01T00:00:00Z'),
    signal: new AbortController().signal,
  };
  return io;
}

describe('runCli without a server', () => {
  it("prints `ferry <version>` from Ferry's package.json with exit 0", async () => {
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const io = fakeIO();
      expect(await runCli([flag], io)).toBe(0);
      expect(io.out).toBe(`ferry ${version}\n`);
      expect(io.err).toBe('');
    }
  });

  it('prints help on stdout with exit 0, and usage errors on stderr with exit 2', async () => {
    const help = fakeIO();
    expect(await runCli(['--help'], help)).toBe(0);
    expect(help.out).toMatch(/^ferry: serve LLMs/);
    expect(help.out).toMatch(/Exit codes:/);

    const serveHelp = fakeIO();
    expect(await runCli(['serve', '--help'], serveHelp)).toBe(0);
    expect(serveHelp.out).toMatch(/^Usage: ferry serve -f FILE/);

    const bad = fakeIO();
    expect(await runCli(['status'], bad)).toBe(2);
    expect(bad.err).toMatch(/^error: NAME is required .*\n\nUsage: ferry status NAME/);
    expect(bad.out).toBe('');

    // The old list --all: exit 2 before connecting, saying what it became, with list's usage.
    const old = fakeIO();
    expect(await runCli(['list', '--all'], old)).toBe(2);
    expect(old.err).toMatch(/^error: --all is now --include-deleted .*\n\nUsage: ferry list /);
  });

  it('rejects an invalid spec with one line per field and exit 2, before connecting', async () => {
    const io = fakeIO({
      'bad.yaml': [
        'apiVersion: ferry.dev/v1alpha1',
        'kind: ServedModel',
        'metadata: { name: Bad_Name }',
        'spec:',
        '  replicas: -1',
        '  source: { huggingface: { repo: Qwen/Qwen2.5-0.5B-Instruct } }',
        '  enigne: {}',
      ].join('\n'),
    });
    expect(await runCli(['serve', '-f', 'bad.yaml'], io)).toBe(2);
    const lines = io.err.trimEnd().split('\n');
    expect(lines[0]).toBe('error: invalid ServedModel in bad.yaml (3 problems):');
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^ {2}metadata\.name: must be a DNS-1035 label/),
      expect.stringMatching(/^ {2}spec\.replicas: must be 0 or more/),
      expect.stringMatching(/^ {2}spec\.enigne: unknown field; did you mean "engine"\?/),
    ]);
    expect(io.err).not.toMatch(/cannot connect/);
  });

  it('reports YAML syntax errors with line and column, and a missing file, as bad usage', async () => {
    const io = fakeIO({ 'broken.yaml': 'metadata:\n  name: [qwen\n' });
    expect(await runCli(['update', '-f', 'broken.yaml'], io)).toBe(2);
    expect(io.err).toMatch(/^error: invalid ServedModel in broken\.yaml \(\d problems?\):\n {2}line \d+, column \d+: /);

    const missing = fakeIO();
    expect(await runCli(['serve', '-f', 'nope.yaml'], missing)).toBe(2);
    expect(missing.err).toBe('error: cannot read nope.yaml: no such file\n');
  });

  it('prints, with --dry-run=client, the objects the builders make for the document, and connects to nothing', async () => {
    const doc = [
      'apiVersion: ferry.dev/v1alpha1',
      'kind: ServedModel',
      'metadata: { name: qwen, namespace: models }',
      'spec:',
      '  source: { huggingface: { repo: Qwen/Qwen2.5-0.5B-Instruct } }',
      '  slo: { ttft: 2s, itl: 100ms }',
    ].join('\n');
    const io = fakeIO({ 'qwen.yaml': doc });
    expect(await runCli(['apply', '-f', 'qwen.yaml', '--dry-run=client'], io)).toBe(0);
    expect(io.err).toBe('');
    expect(io.out).toMatch(/^# ferry apply --dry-run=client: the document is valid; .* models\/qwen\n/);
    const printed = parseAllDocuments(io.out).map((d) => d.toJS() as KubernetesObject);
    const built = objectList(buildAll(parseServedModel(parseYaml(doc)), { rootUid: 'x' }));
    expect(printed.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual(
      built.map((o) => `${o.kind}/${o.metadata?.name}`),
    );
    expect(printed.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'ConfigMap/qwen-ferry',
      'PersistentVolumeClaim/qwen-weights',
      expect.stringMatching(/^Job\/qwen-pull-[0-9a-f]{8}$/),
      'ConfigMap/qwen-admission',
      'Deployment/qwen',
      'Service/qwen',
    ]);
    const json = fakeIO({ 'qwen.yaml': doc });
    expect(await runCli(['serve', '-f', 'qwen.yaml', '--dry-run=client', '-o', 'json'], json)).toBe(0);
    expect(JSON.parse(json.out) as { kind: string; items: unknown[] }).toMatchObject({ kind: 'List' });
    const names = fakeIO({ 'qwen.yaml': doc });
    expect(await runCli(['serve', '-f', 'qwen.yaml', '--dry-run=client', '-o', 'name'], names)).toBe(0);
    expect(names.out.split('\n').slice(0, 2)).toEqual(['configmap/qwen-ferry', 'persistentvolumeclaim/qwen-weights']);
    // An invalid document: exit 2, as without --dry-run.
    const bad = fakeIO({ 'bad.yaml': doc.replace('name: qwen', 'name: Qwen') });
    expect(await runCli(['serve', '-f', 'bad.yaml', '--dry-run=client'], bad)).toBe(2);
    expect(bad.err).toMatch(/^error: invalid ServedModel in bad\.yaml/);
  });

  it('exits 5 naming the address when Temporal does not answer', async () => {
    const io = fakeIO();
    expect(await runCli(['list'], io)).toBe(5);
    expect(io.err).toMatch(
      /^error: cannot connect to Temporal at 127\.0\.0\.1:9: .*check TEMPORAL_ADDRESS, or run `npm run local:up`/,
    );
  }, 20_000);
});

describe('what the CLI reads and prints', () => {
  it('decodes a document on stdin as one UTF-8 stream: a character split across two reads stays whole', async () => {
    const doc = Buffer.from(
      'apiVersion: ferry.dev/v1alpha1\nkind: ServedModel\nmetadata: { name: café }\n' +
        'spec: { source: { huggingface: { repo: Qwen/Qwen2.5-0.5B-Instruct } } }\n',
    );
    const at = doc.indexOf(Buffer.from('é')) + 1; // between the two bytes of é
    const io = fakeIO({}, [doc.subarray(0, at), doc.subarray(at)]);
    expect(await runCli(['serve', '-f', '-'], io)).toBe(2);
    expect(io.err).toContain('"café"');
    expect(io.err).not.toContain('\ufffd');
  });

  it('writes control characters from outside Ferry as \\uXXXX, keeping lines, tabs and its own line clearing', () => {
    const hostile = 'pull failed: \x1b]0;owned\x07\x1b[31mred\r\x9b2J \u202egnp.exe\n\tnext';
    expect(safeText(hostile)).toBe(
      'pull failed: \\u001b]0;owned\\u0007\\u001b[31mred\\u000d\\u009b2J \\u202egnp.exe\n\tnext',
    );
    expect(safeText(`${CLEAR_LINE}[####    ] 50%`)).toBe(`${CLEAR_LINE}[####    ] 50%`);
    // In JSON output the escape is inside a string, where it means the same character.
    const json = JSON.stringify({ message: 'a\u009bb' });
    expect(JSON.parse(safeText(json))).toEqual({ message: 'a\u009bb' });
    let written = '';
    terminalSafe({ write: (t: string) => (written += t), isTTY: true }).write('\x1b[2J');
    expect(written).toBe('\\u001b[2J');
  });
});

describe('ferry explain', () => {
  it('says what a field is from the shipped schema: type, default, bounds, meaning, and the fields under it', async () => {
    const port = fakeIO();
    expect(await runCli(['explain', 'spec.engine.port'], port)).toBe(0);
    expect(port.out).toBe(
      [
        'FIELD: spec.engine.port <integer>',
        'DEFAULT: 8000',
        'BOUNDS: at least 1, at most 65535',
        '',
        'DESCRIPTION:',
        '  The port vLLM listens on, and the port of the Service.',
        '',
      ].join('\n'),
    );
    const source = fakeIO();
    expect(await runCli(['explain', 'ServedModel.spec.source'], source)).toBe(0);
    expect(source.out).toMatch(/^FIELD: spec\.source <object> \(required\)\n/);
    expect(source.out).toMatch(/\nFIELDS:\n {2}huggingface +<object>\n/);
    // Through a list: the fields of its items.
    const env = fakeIO();
    expect(await runCli(['explain', 'spec.engine.env.valueFrom'], env)).toBe(0);
    expect(env.out).toMatch(/^FIELD: spec\.engine\.env\.valueFrom <object>/);
    // The pattern the parser tests, but not the one every string has (printable characters).
    const name = fakeIO();
    expect(await runCli(['explain', 'metadata.name'], name)).toBe(0);
    expect(name.out).toMatch(/\nBOUNDS: at most 63 characters\nPATTERN: \^\[a-z\]\(\[-a-z0-9\]\*\[a-z0-9\]\)\?\$\n/);
    const namespaces = fakeIO();
    expect(
      await runCli(
        ['explain', 'spec.scheduling.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.namespaces'],
        namespaces,
      ),
    ).toBe(0);
    expect(namespaces.out).not.toContain('PATTERN');
    const whole = fakeIO();
    expect(await runCli(['explain'], whole)).toBe(0);
    expect(whole.out).toMatch(/^FIELD: ServedModel <object>\n[\s\S]*\n {2}spec +<object> \(required\)\n/);
  });

  it('names the fields there are for one that is not, with exit 2', async () => {
    const io = fakeIO();
    expect(await runCli(['explain', 'spec.engine.prot'], io)).toBe(2);
    expect(io.err).toBe(
      'error: spec.engine has no field "prot"; its fields: image, servedModelName, port, args, env, apiKeySecret, lora, startupTimeout\n',
    );
    expect(parseError(['explain', 'a', 'b']).message).toMatch(/one field at a time/);
    expect(parseError(['explain', 'spec..port']).message).toMatch(/names joined by dots/);
  });
});

describe('ferry rollout', () => {
  it('takes an action, then NAME, with --revision and --reason for a word on it', () => {
    expect(
      parseCommand(['rollout', 'approve', 'qwen', '-n', 'models', '--revision', 'r2', '--reason', 'eval ok']),
    ).toMatchObject({
      kind: 'rollout',
      action: 'approve',
      ref: { name: 'qwen', namespace: 'models' },
      revision: 'r2',
      reason: 'eval ok',
    });
    expect(parseCommand(['rollout', 'status', 'qwen'])).toMatchObject({ action: 'status', ref: { name: 'qwen' } });
    expect(parseCommand(['rollout', 'abort', 'qwen', '--cluster', 'east'])).toMatchObject({
      action: 'abort',
      ref: { name: 'qwen', cluster: 'east' },
    });
    expect(parseError(['rollout', 'qwen']).message).toBe(
      'rollout takes status, approve, abort, undo first, then NAME; got "qwen"',
    );
    expect(parseError(['rollout', 'approve']).message).toBe('NAME is required (the metadata.name of the model)');
    expect(parseError(['rollout', 'approve', 'qwen', '--revision', '2']).message).toBe(
      '--revision names a revision like r2, got "2"',
    );
    expect(parseError(['rollout', 'status', 'qwen', '--reason', 'x']).message).toBe(
      'rollout status takes no --revision or --reason',
    );
  });

  it('takes undo with --revision, and --keep-weights on an abort only', () => {
    expect(parseCommand(['rollout', 'undo', 'qwen', '--revision', 'r1'])).toMatchObject({
      action: 'undo',
      revision: 'r1',
      ref: { name: 'qwen' },
    });
    expect(parseCommand(['rollout', 'abort', 'qwen', '--keep-weights'])).toMatchObject({
      action: 'abort',
      keepWeights: true,
    });
    expect(parseCommand(['rollout', 'abort', 'qwen'])).not.toHaveProperty('keepWeights');
    expect(parseError(['rollout', 'undo', 'qwen', '--keep-weights']).message).toBe(
      '--keep-weights is for rollout abort, not rollout undo',
    );
  });
});
