// `finishEarly` (client/cli/prepare.ts): the prelude ends `ferry update` and `ferry delete` itself only when the
// workflow's answer is all the command prints, in the words the commands print; anything else goes on through the
// SDK. The same on the wire against a real server: test/integration/client/cli.test.ts.
import { describe, expect, it } from 'vitest';
import { parseCommand } from '../../client/cli/args.js';
import type { CliIO } from '../../client/cli/io.js';
import { finishEarly, type Prepared, type ServerCommand } from '../../client/cli/prepare.js';
import { fixtureModel, minimalHf } from './fixtures.js';

function capture(): { io: CliIO; out: () => string } {
  let text = '';
  const io: CliIO = {
    stdout: { write: (chunk: string) => (text += chunk) },
    stderr: { write: () => true },
    stdin: (async function* () {})(),
    env: {},
    cwd: '/',
    now: () => new Date(0),
    signal: new AbortController().signal,
  };
  return { io, out: () => text };
}

const command = (argv: string[]) => parseCommand(argv) as ServerCommand;
const spec = fixtureModel('minimal-hf', { namespace: 'models' });
const prepared: Prepared = {
  target: { error: 'not read: the update has been sent' },
  input: { docs: [{ source: 'm.yaml', doc: minimalHf, spec }] },
};
const result = { accepted: true, generation: 3, changed: true, sourceChanged: false, changes: ['spec.replicas'] };
const completed = { runId: 'run-1', completed: { result } };

describe('finishEarly', () => {
  it('prints an update that completed with its acceptance, in text and JSON', () => {
    const text = capture();
    expect(finishEarly(command(['update', '-f', 'm.yaml']), text.io, prepared, completed)).toBe(0);
    expect(text.out()).toBe('updated models/qwen: generation 3: spec.replicas changed\n');
    const json = capture();
    expect(finishEarly(command(['update', '-f', 'm.yaml', '-o', 'json']), json.io, prepared, completed)).toBe(0);
    expect(JSON.parse(json.out())).toEqual(result);
  });

  it('prints a delete the workflow accepted', () => {
    const text = capture();
    const accepted = { runId: 'run-1' };
    expect(
      finishEarly(command(['delete', 'qwen', '-n', 'models', '--cluster', 'gpu']), text.io, prepared, accepted),
    ).toBe(0);
    expect(text.out()).toBe(
      'deleting qwen (namespace models, cluster gpu) (follow it with `ferry watch qwen -n models`)\n',
    );
    const json = capture();
    finishEarly(
      command(['delete', 'qwen', '-n', 'models', '--cluster', 'gpu', '-o', 'json']),
      json.io,
      prepared,
      accepted,
    );
    expect(JSON.parse(json.out())).toEqual({
      ref: { name: 'qwen', namespace: 'models', cluster: 'gpu' },
      alreadyDeleted: false,
    });
  });

  it('leaves to the SDK a wait, an update without its result, and a result that is not a change', () => {
    const cases: [string[], Parameters<typeof finishEarly>[3]][] = [
      [['update', '-f', 'm.yaml', '--wait'], completed],
      [['delete', 'qwen', '-n', 'models', '--cluster', 'gpu', '--wait'], { runId: 'run-1' }],
      [['update', '-f', 'm.yaml'], { runId: 'run-1' }],
      [['update', '-f', 'm.yaml'], { runId: 'run-1', completed: { result: undefined } }],
      [['update', '-f', 'm.yaml'], { runId: 'run-1', completed: { result: { ...result, generation: '3' } } }],
      [['update', '-f', 'm.yaml'], { runId: 'run-1', completed: { result: { ...result, changes: [1] } } }],
    ];
    for (const [argv, accepted] of cases) {
      const { io, out } = capture();
      expect(finishEarly(command(argv), io, prepared, accepted), argv.join(' ')).toBeUndefined();
      expect(out()).toBe('');
    }
  });
});
