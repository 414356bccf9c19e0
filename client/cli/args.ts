// `ferry` command lines, parsed into commands (pure: no I/O, so every rule is unit-tested).
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Phase } from '../../workflows/contract/status.js';
import type { TemporalOverrides } from '../temporal-env.js';
import {
  DEFAULT_NAMESPACE,
  duration,
  label,
  noPositionals,
  type OutputFormat,
  outputFormat,
  phaseList,
  type RefArgs,
  refArgs,
  requestTimeout,
  sources,
  type Sources,
  usage,
  UsageError,
} from './arg-values.js';
import { type DryRun, dryRunOf, withDryRunDefault } from './dry-run-arg.js';
import { didYouMean, nearest } from './nearest.js';
import { labelSelector, readArgs, type ReadArgs, WATCH_OPTIONS } from './read-args.js';
import { ROLLOUT_OPTIONS, rolloutArgs, type RolloutArgs } from './rollout-args.js';

export { DRY_RUNS } from './dry-run-arg.js';
export { type RefArgs, UsageError } from './arg-values.js';

export const COMMANDS = [
  'serve',
  'update',
  'apply',
  'status',
  'list',
  'delete',
  'diff',
  'watch',
  'rollout',
  'move',
  'explain',
  'completion',
] as const;
export type CommandName = (typeof COMMANDS)[number];

/** What serve, update and apply take: documents, and what to do with them. */
interface DocumentArgs extends Sources {
  wait: boolean;
  timeoutMs?: number;
  /**
   * `--dry-run=client`: check the document and print the objects Ferry would create; connect to nothing.
   * `--dry-run=server`: the same, checked by the worker of the model's cluster and the Kubernetes API server.
   */
  dryRun?: DryRun;
}

interface Common {
  output: OutputFormat;
  temporal: TemporalOverrides;
  /** `--request-timeout`: how long one request to Temporal may take; absent or 0: no bound of the CLI's own. */
  requestTimeoutMs?: number;
}

/** What `ferry delete` takes besides the model: a wait and a reason. */
interface DeleteArgs {
  wait: boolean;
  timeoutMs?: number;
  reason?: string;
}

export type Command =
  | { kind: 'help'; topic?: CommandName }
  | { kind: 'version' }
  /** A field of the document, from the schema (offline); `path` empty: the document itself. */
  | { kind: 'explain'; path: string }
  /** The shell's completion script. */
  | { kind: 'completion'; shell: Shell }
  | (Common & DocumentArgs & { kind: 'serve' })
  | (Common & DocumentArgs & { kind: 'update' })
  | (Common & DocumentArgs & { kind: 'apply' })
  | (Common & ReadArgs & { kind: 'status'; ref: RefArgs })
  | (Common &
      ReadArgs & {
        kind: 'list';
        phases: Phase[];
        /** The one namespace listed; absent with -A/--all-namespaces: every namespace. */
        namespace?: string;
        cluster?: string;
        /** --include-deleted: models whose workflow has closed too. */
        includeDeleted: boolean;
        /** -l/--selector: a label selector, checked here and matched against each model's labels. */
        selector?: string;
      })
  /** The model named on the command line, or (`-f`) the models the documents name. */
  | (Common & DeleteArgs & { kind: 'delete' } & ({ ref: RefArgs } | Sources))
  /** What update or apply would change: the spec and the Kubernetes objects, as unified diffs. */
  | (Common & Sources & { kind: 'diff' })
  | (Common & { kind: 'watch'; ref: RefArgs; timeoutMs?: number })
  | (Common & RolloutArgs & { kind: 'rollout'; ref: RefArgs })
  /** `--to CLUSTER`: start moving the model there (`--wait`: and follow the move); `--status`, `--abort`: its move. */
  | (Common & { kind: 'move'; ref: RefArgs } & MoveAction);

/** What `ferry move` does: start a move, show the model's move, or abort it. */
export type MoveAction =
  | {
      action: 'start';
      to: string;
      wait: boolean;
      timeoutMs?: number;
      readyTimeoutMs?: number;
      /** `-f FILE`: the model's document, served on the target as it is (for a source whose worker is gone). */
      files?: [string];
    }
  | { action: 'status' | 'abort' };

const SHELLS = ['bash', 'zsh', 'fish'] as const;
type Shell = (typeof SHELLS)[number];

/** The long flags (and their short forms) of `command`, for completion. */
export function flagsOf(command: CommandName): { long: string; short?: string; value: boolean }[] {
  return Object.entries({ ...GLOBAL_OPTIONS, ...OPTIONS[command] }).map(([long, option]) => ({
    long,
    ...('short' in option ? { short: option.short } : {}),
    value: option.type === 'string',
  }));
}

const GLOBAL_OPTIONS = {
  output: { type: 'string', short: 'o' },
  'temporal-address': { type: 'string' },
  'temporal-namespace': { type: 'string' },
  profile: { type: 'string' },
  'request-timeout': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

const REF_OPTIONS = {
  namespace: { type: 'string', short: 'n' },
  cluster: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

const SOURCE_OPTIONS = {
  file: { type: 'string', short: 'f', multiple: true },
  namespace: { type: 'string', short: 'n' },
} as const satisfies ParseArgsConfig['options'];

const DOCUMENT_OPTIONS = {
  ...SOURCE_OPTIONS,
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
  'dry-run': { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

const OPTIONS = {
  serve: DOCUMENT_OPTIONS,
  update: DOCUMENT_OPTIONS,
  apply: DOCUMENT_OPTIONS,
  status: { ...REF_OPTIONS, ...WATCH_OPTIONS },
  list: {
    phase: { type: 'string' },
    ...REF_OPTIONS,
    'all-namespaces': { type: 'boolean', short: 'A' },
    'include-deleted': { type: 'boolean' },
    selector: { type: 'string', short: 'l' },
    ...WATCH_OPTIONS,
  },
  delete: {
    ...REF_OPTIONS,
    file: SOURCE_OPTIONS.file,
    wait: { type: 'boolean' },
    timeout: { type: 'string' },
    reason: { type: 'string' },
  },
  diff: SOURCE_OPTIONS,
  watch: { ...REF_OPTIONS, timeout: { type: 'string' } },
  rollout: { ...REF_OPTIONS, ...ROLLOUT_OPTIONS },
  move: {
    ...REF_OPTIONS,
    to: { type: 'string' },
    status: { type: 'boolean' },
    abort: { type: 'boolean' },
    wait: { type: 'boolean' },
    timeout: { type: 'string' },
    'ready-timeout': { type: 'string' },
    file: SOURCE_OPTIONS.file,
  },
  explain: {},
  completion: {},
} as const satisfies Record<CommandName, ParseArgsConfig['options']>;

/** Parses `argv` (without `node` and the script); throws `UsageError`. */
export function parseCommand(argv: readonly string[]): Command {
  const first = argv[0];
  if (first === undefined || first === '-h' || first === '--help' || first === 'help') {
    const topic = first === 'help' ? argv[1] : undefined;
    if (topic !== undefined && !isCommand(topic)) throw new UsageError(`unknown command ${JSON.stringify(topic)}`);
    if (first === undefined) throw new UsageError('no command given');
    return { kind: 'help', topic };
  }
  if (first === '--version' || first === '-V') return { kind: 'version' };
  if (!isCommand(first)) {
    throw new UsageError(
      first.startsWith('-')
        ? `a command comes first (one of ${COMMANDS.join(', ')}), got ${first}`
        : `unknown command ${JSON.stringify(first)}; ${didYouMean(first, COMMANDS)}commands: ${COMMANDS.join(', ')}`,
    );
  }
  const command = first;
  let parsed;
  try {
    parsed = parseArgs({
      args: 'dry-run' in OPTIONS[command] ? withDryRunDefault(argv.slice(1)) : argv.slice(1),
      options: { ...GLOBAL_OPTIONS, ...OPTIONS[command] },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    const unknown = /^Unknown option '(-{1,2}[^']+)'/.exec(message)?.[1];
    // `ferry list --all` once meant "deleted ones too"; next to -A/--all-namespaces it would be ambiguous.
    if (command === 'list' && unknown?.split('=')[0] === '--all') {
      throw new UsageError(
        '--all is now --include-deleted (deleted models); -A/--all-namespaces lists every namespace',
        command,
      );
    }
    const flags = Object.entries({ ...GLOBAL_OPTIONS, ...OPTIONS[command] }).map(([name]) => `--${name}`);
    const near = unknown ? nearest(unknown.split('=')[0]!, flags) : undefined;
    throw new UsageError(near ? `${message}; did you mean ${near}?` : message, command);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (values.help) return { kind: 'help', topic: command };

  const str = (key: string) => values[key] as string | undefined;
  const bool = (key: string) => values[key] === true;
  if (command === 'completion') {
    const shell = parsed.positionals[0];
    if (parsed.positionals.length !== 1 || !SHELLS.includes(shell as Shell)) {
      throw new UsageError(`completion takes one shell: ${SHELLS.join(', ')}`, command);
    }
    return { kind: 'completion', shell: shell as Shell };
  }
  if (command === 'explain') {
    if (parsed.positionals.length > 1) {
      throw new UsageError(`one field at a time, like spec.engine.port; got ${parsed.positionals.length}`, command);
    }
    // As kubectl explain: the kind may lead the path.
    const path = (parsed.positionals[0] ?? '').replace(/^servedmodels?(\.|$)/i, '');
    if (!/^([A-Za-z][A-Za-z0-9]*(\.|$))*$/.test(path)) {
      throw new UsageError(
        `a field path is names joined by dots, like spec.engine.port; got ${JSON.stringify(path)}`,
        command,
      );
    }
    return { kind: 'explain', path };
  }
  const common: Common = {
    output: outputFormat(str('output'), command),
    temporal: {
      ...(str('temporal-address') ? { address: str('temporal-address') } : {}),
      ...(str('temporal-namespace') ? { namespace: str('temporal-namespace') } : {}),
      ...(str('profile') ? { profile: str('profile') } : {}),
    },
    ...requestTimeout(str('request-timeout'), command),
  };
  const positionals = parsed.positionals;
  const timeoutMs = duration(str('timeout'), command);

  switch (command) {
    case 'serve':
    case 'update':
    case 'apply': {
      noPositionals(positionals, command, '-f FILE names the model');
      const dryRun = dryRunOf(str('dry-run'), usage(command));
      if (dryRun && bool('wait'))
        throw new UsageError(`--dry-run=${dryRun} creates nothing to wait for: drop --wait`, command);
      return {
        kind: command,
        ...common,
        ...sources(values, command),
        wait: bool('wait'),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        ...(dryRun ? { dryRun } : {}),
      };
    }
    case 'diff':
      noPositionals(positionals, command, '-f FILE names the models');
      if (common.output !== 'text') throw new UsageError('diff prints unified diffs: drop -o', command);
      return { kind: 'diff', ...common, ...sources(values, command) };
    case 'status':
      return {
        kind: 'status',
        ...common,
        ...readArgs(values, timeoutMs, usage(command)),
        ref: refArgs(positionals, values, command),
      };
    case 'watch':
      return {
        kind: 'watch',
        ...common,
        ref: refArgs(positionals, values, command),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      };
    case 'delete':
      if (values.file !== undefined && positionals.length > 0) {
        throw new UsageError('name the models either by NAME or by -f FILE, not both', command);
      }
      if (values.file !== undefined && values.cluster !== undefined) {
        throw new UsageError('with -f the documents name their cluster: drop --cluster', command);
      }
      return {
        kind: 'delete',
        ...common,
        ...(values.file !== undefined ? sources(values, command) : { ref: refArgs(positionals, values, command) }),
        wait: bool('wait'),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        ...(str('reason') ? { reason: str('reason') } : {}),
      };
    case 'rollout': {
      const [action, ...rest] = positionals;
      return {
        kind: 'rollout',
        ...common,
        ...rolloutArgs(action, str, usage(command), bool('keep-weights')),
        ref: refArgs(rest, values, command),
      };
    }
    case 'move':
      return { kind: 'move', ...common, ref: refArgs(positionals, values, command), ...moveAction(values, timeoutMs) };
    case 'list': {
      noPositionals(positionals, command, 'filter with --phase, -n, -A and --cluster');
      // As kubectl: -A wins over -n (the namespace is ignored, though it must still be a namespace).
      const namespace = label(str('namespace'), 'namespace', command) ?? DEFAULT_NAMESPACE;
      const cluster = label(str('cluster'), 'cluster', command);
      const selector = labelSelector(str('selector'), usage(command));
      return {
        kind: 'list',
        ...common,
        ...readArgs(values, timeoutMs, usage(command)),
        phases: phaseList(str('phase'), command),
        ...(bool('all-namespaces') ? {} : { namespace }),
        ...(cluster ? { cluster } : {}),
        includeDeleted: bool('include-deleted'),
        ...(selector !== undefined ? { selector } : {}),
      };
    }
  }
}

/** `--to CLUSTER [--wait] [--timeout D] [--ready-timeout D]`, `--status` or `--abort`: one of the three. */
function moveAction(values: Record<string, unknown>, timeoutMs: number | undefined): MoveAction {
  const to = label(values.to as string | undefined, '--to', 'move');
  const chosen = [to && '--to', values.status && '--status', values.abort && '--abort'].filter(Boolean);
  if (chosen.length !== 1) {
    throw new UsageError(
      chosen.length === 0
        ? 'say what to do: --to CLUSTER (move the model there), --status (where its move is) or --abort (stop it)'
        : `one of --to, --status and --abort, got ${chosen.join(' and ')}`,
      'move',
    );
  }
  const waitOnly = ['wait', 'timeout', 'ready-timeout', 'file'].filter((flag) => values[flag] !== undefined);
  if (!to) {
    if (waitOnly.length > 0) throw new UsageError(`--${waitOnly[0]} goes with --to`, 'move');
    return { action: values.status ? 'status' : 'abort' };
  }
  if (timeoutMs !== undefined && values.wait !== true)
    throw new UsageError('--timeout bounds --wait: add --wait', 'move');
  const readyTimeoutMs = duration(values['ready-timeout'] as string | undefined, 'move', '--ready-timeout');
  const files = (values.file as string[] | undefined) ?? [];
  if (files.length > 1) throw new UsageError('-f takes one file: the document of the model that moves', 'move');
  if (files[0] === '') throw new UsageError('-f needs a file name or -', 'move');
  return {
    action: 'start',
    to,
    wait: values.wait === true,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(readyTimeoutMs !== undefined ? { readyTimeoutMs } : {}),
    ...(files[0] !== undefined ? { files: [files[0]] as [string] } : {}),
  };
}

function isCommand(word: string): word is CommandName {
  return (COMMANDS as readonly string[]).includes(word);
}

/**
 * Whether the command's update is sent before the Temporal SDK loads (cli/prepare.ts): `ferry update`, and `ferry
 * delete` when `--cluster` names the model whole (without it, Temporal is first asked which cluster serves it).
 */
export function sendsEarly(command: Command): boolean {
  return (
    // The early update is one request the CLI sends itself; with --request-timeout every request goes through the SDK,
    // which bounds each one.
    ((command.kind === 'update' && command.dryRun === undefined) ||
      (command.kind === 'delete' && 'ref' in command && command.ref.cluster !== undefined)) &&
    command.requestTimeoutMs === undefined
  );
}
