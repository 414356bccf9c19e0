// What status and list take besides their filters: -w/--watch, --watch-only, --timeout, -o wide, and list's -l.
import { describe, expect, it } from 'vitest';
import { parseCommand, UsageError } from '../../client/cli/args.js';

const parseError = (argv: string[]): UsageError => {
  try {
    parseCommand(argv);
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error(`parsed without error: ${argv.join(' ')}`);
};

describe('-w/--watch and --watch-only', () => {
  it('watches status NAME and list, until Ctrl-C unless --timeout says how long', () => {
    expect(parseCommand(['status', 'qwen', '-w'])).toMatchObject({ kind: 'status', watch: { only: false } });
    expect(parseCommand(['status', 'qwen', '-w'])).not.toHaveProperty('watch.timeoutMs');
    expect(parseCommand(['list', '--watch', '--timeout', '5m'])).toMatchObject({
      kind: 'list',
      watch: { only: false, timeoutMs: 5 * 60_000 },
    });
    // --watch-only watches too (as kubectl's), with or without -w.
    expect(parseCommand(['list', '--watch-only'])).toMatchObject({ watch: { only: true } });
    expect(parseCommand(['status', 'qwen', '-w', '--watch-only'])).toMatchObject({ watch: { only: true } });
    expect(parseCommand(['status', 'qwen'])).not.toHaveProperty('watch');
    expect(parseCommand(['list'])).not.toHaveProperty('watch');
  });

  it('refuses a --timeout without a watch, and a timeout that is not a duration', () => {
    const err = parseError(['list', '--timeout', '5m']);
    expect(err.message).toBe('--timeout is how long -w/--watch watches: add -w, or drop --timeout');
    expect(err.command).toBe('list');
    expect(parseError(['status', 'qwen', '-w', '--timeout', 'soon']).message).toMatch(
      /^--timeout must be a duration like 90s/,
    );
  });

  it('is not a flag of the commands that do not read', () => {
    expect(parseError(['delete', 'qwen', '-w']).message).toMatch(/^Unknown option '-w'/);
    expect(parseError(['watch', 'qwen', '--watch-only']).message).toMatch(/^Unknown option '--watch-only'/);
  });
});

describe('-o wide', () => {
  it('is text with wide set on status and list, and plain text elsewhere', () => {
    expect(parseCommand(['list', '-o', 'wide'])).toMatchObject({ output: 'text', wide: true });
    expect(parseCommand(['status', 'qwen', '--output=wide'])).toMatchObject({ output: 'text', wide: true });
    expect(parseCommand(['list', '-o', 'json'])).not.toHaveProperty('wide');
    expect(parseCommand(['delete', 'qwen', '-o', 'wide'])).not.toHaveProperty('wide');
    expect(parseCommand(['delete', 'qwen', '-o', 'wide'])).toMatchObject({ output: 'text' });
  });
});

describe('-l/--selector', () => {
  it('takes a label selector on list, kept as written', () => {
    expect(parseCommand(['list', '-l', 'team=chat,tier in (gold,silver)'])).toMatchObject({
      kind: 'list',
      selector: 'team=chat,tier in (gold,silver)',
    });
    expect(parseCommand(['list', '--selector=!canary'])).toMatchObject({ selector: '!canary' });
    expect(parseCommand(['list'])).not.toHaveProperty('selector');
  });

  it('refuses a bad selector as bad usage, saying what is wrong', () => {
    const err = parseError(['list', '-l', 'tier in (gold']);
    expect(err.message).toBe('-l/--selector: a "(" without its ")" in "tier in (gold"');
    expect(err.command).toBe('list');
    expect(parseError(['list', '-l', '']).message).toMatch(/^-l\/--selector: the selector is empty/);
    expect(parseError(['status', 'qwen', '-l', 'a=b']).message).toMatch(/^Unknown option '-l'/);
  });
});
