// `ferry completion bash|zsh|fish`: a completion script for the shell, made from the parser's own table of commands
// and flags (args.ts), so it cannot name a flag the parser does not take. Commands, flags, files after -f, the values
// of -o, --phase and --dry-run. Offline.
import { PHASES } from '../../workflows/contract/status.js';
import { COMMANDS, DRY_RUNS, flagsOf, type CommandName } from './args.js';

const VALUES: Record<string, readonly string[]> = {
  output: ['json', 'yaml', 'name', 'text', 'wide'],
  phase: PHASES,
  'dry-run': DRY_RUNS,
  shell: ['bash', 'zsh', 'fish'],
};

function words(command: CommandName): string {
  return flagsOf(command)
    .flatMap((f) => [`--${f.long}`, ...(f.short ? [`-${f.short}`] : [])])
    .join(' ');
}

function bash(): string {
  const cases = COMMANDS.map((c) => `    ${c}) flags="${words(c)}" ;;`).join('\n');
  return `# ferry completion for bash: source <(ferry completion bash), or save it in /etc/bash_completion.d/ferry
_ferry() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" flags=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${COMMANDS.join(' ')} help --help --version" -- "$cur"))
    return
  fi
  case "$prev" in
    -f|--file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -W "${VALUES.output!.join(' ')}" -- "$cur")); return ;;
    --phase) COMPREPLY=($(compgen -W "${VALUES.phase!.join(' ')}" -- "$cur")); return ;;
    --dry-run) COMPREPLY=($(compgen -W "${VALUES['dry-run']!.join(' ')}" -- "$cur")); return ;;
  esac
  case "\${COMP_WORDS[1]}" in
${cases}
  esac
  if [ "\${COMP_WORDS[1]}" = completion ] && [ "$COMP_CWORD" -eq 2 ]; then
    COMPREPLY=($(compgen -W "${VALUES.shell!.join(' ')}" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}
complete -o default -F _ferry ferry
`;
}

function zsh(): string {
  return `# ferry completion for zsh: source <(ferry completion zsh) (bash's script, through zsh's bashcompinit)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bash()}`;
}

function fish(): string {
  const lines = [
    '# ferry completion for fish: ferry completion fish > ~/.config/fish/completions/ferry.fish',
    'complete -c ferry -f',
    `complete -c ferry -n __fish_use_subcommand -a '${COMMANDS.join(' ')}'`,
  ];
  for (const command of COMMANDS) {
    for (const flag of flagsOf(command)) {
      const values = VALUES[flag.long];
      const arg = flag.long === 'file' ? ' -r -F' : values ? ` -x -a '${values.join(' ')}'` : flag.value ? ' -x' : '';
      lines.push(
        `complete -c ferry -n '__fish_seen_subcommand_from ${command}' -l ${flag.long}${flag.short ? ` -s ${flag.short}` : ''}${arg}`,
      );
    }
  }
  lines.push(`complete -c ferry -n '__fish_seen_subcommand_from completion' -a '${VALUES.shell!.join(' ')}'`);
  return `${lines.join('\n')}\n`;
}

export function completionScript(shell: 'bash' | 'zsh' | 'fish'): string {
  return shell === 'bash' ? bash() : shell === 'zsh' ? zsh() : fish();
}
