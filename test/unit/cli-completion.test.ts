// `ferry completion`: the bash script run by bash, as the shell calls it on Tab (COMP_WORDS, COMP_CWORD), answers the
// commands, each command's own flags, files after -f and the values of -o; the fish script names only flags the parser
// takes. zsh runs bash's script through its bashcompinit.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS, flagsOf, parseCommand } from '../../client/cli/args.js';
import { completionScript } from '../../client/cli/completion.js';

const dir = mkdtempSync(join(tmpdir(), 'ferry-completion-'));
const script = join(dir, 'ferry.bash');
writeFileSync(script, completionScript('bash'));
writeFileSync(join(dir, 'qwen.yaml'), '');

/** What bash's completion offers for the words typed so far (the last one being completed). */
function complete(...typed: string[]): string[] {
  const words = ['ferry', ...typed].map((w) => `'${w}'`).join(' ');
  const run = spawnSync(
    'bash',
    [
      '-c',
      `source '${script}'; COMP_WORDS=(${words}); COMP_CWORD=${typed.length}; _ferry; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  expect(run.status, run.stderr).toBe(0);
  return run.stdout.split('\n').filter(Boolean).sort();
}

describe('ferry completion bash', () => {
  it('completes the commands, then each command its own flags', () => {
    expect(complete('')).toEqual([...COMMANDS, '--help', '--version', 'help'].sort());
    expect(complete('st')).toEqual(['status']);
    expect(complete('serve', '--')).toEqual(
      flagsOf('serve')
        .map((f) => `--${f.long}`)
        .sort(),
    );
    expect(complete('serve', '--dr')).toEqual(['--dry-run']);
    expect(complete('list', '-')).toContain('-A');
    expect(complete('status', '--')).not.toContain('--wait');
  });

  it('completes files after -f, and the values of -o, --phase and --dry-run', () => {
    expect(complete('apply', '-f', 'qw')).toEqual(['qwen.yaml']);
    expect(complete('list', '-o', '')).toEqual(['json', 'name', 'text', 'wide', 'yaml']);
    expect(complete('list', '--phase', 'Rea')).toEqual(['Ready']);
    expect(complete('serve', '--dry-run', '')).toEqual(['client', 'server']);
    expect(complete('completion', '')).toEqual(['bash', 'fish', 'zsh']);
  });
});

describe('ferry completion fish and zsh', () => {
  it('names in fish only the flags each command takes', () => {
    const lines = completionScript('fish').split('\n');
    for (const line of lines.filter((l) => l.includes('__fish_seen_subcommand_from') && l.includes(' -l '))) {
      const [, command, flag] = /from (\S+)' -l (\S+)/.exec(line)!;
      expect(
        flagsOf(command as (typeof COMMANDS)[number]).map((f) => f.long),
        line,
      ).toContain(flag);
    }
    expect(lines).toContain("complete -c ferry -n '__fish_seen_subcommand_from serve' -l file -s f -r -F");
  });

  it('gives zsh the bash script through bashcompinit, and the parser takes completion SHELL', () => {
    expect(completionScript('zsh')).toContain('bashcompinit');
    expect(completionScript('zsh')).toContain(completionScript('bash'));
    expect(parseCommand(['completion', 'zsh'])).toEqual({ kind: 'completion', shell: 'zsh' });
    expect(() => parseCommand(['completion', 'tcsh'])).toThrow(/completion takes one shell: bash, zsh, fish/);
  });
});
