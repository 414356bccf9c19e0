// The values of `ferry` command lines (args.ts): names, durations, files and formats, each checked, each bad one a
// `UsageError` naming the command. Pure, as args.ts.
// Three zod-free modules of the contract, not its barrel: the barrel loads zod and the Temporal SDK (about 0.2 s),
// and `ferry --help` and `--version` load nothing but this parser (docs/performance.md#cli-start).
import { DNS1123_LABEL } from '../../workflows/contract/spec/names.js';
import { parseDuration } from '../../workflows/contract/spec/quantities.js';
import { type Phase, PHASES } from '../../workflows/contract/status.js';
import type { CommandName } from './args.js';

export type OutputFormat = 'text' | 'json' | 'yaml' | 'name';

/** The namespace a command means without -n, as kubectl's without a namespace in its context. */
export const DEFAULT_NAMESPACE = 'default';

/** A model named on the command line; `cluster` unset means "find it" (see `resolveRef`). */
export interface RefArgs {
  name: string;
  namespace: string;
  cluster?: string;
}

/** Where documents come from: files, directories and `-` (stdin), and the namespace `-n` gives them. */
export interface Sources {
  /** In the order given: a file (a YAML stream of one or more documents), a directory (its *.yaml, *.yml, *.json) or `-`. */
  files: string[];
  /** `-n`: the namespace of every document; fills `metadata.namespace` where a document has none. */
  namespace?: string;
}

/** Bad command line: the CLI prints the message and the command's usage, and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';

  constructor(
    message: string,
    readonly command?: CommandName,
  ) {
    super(message);
  }
}

/** Throws the command's `UsageError` (for the helpers of read-args.ts, which do not import this module). */
export function usage(command: CommandName): (message: string) => never {
  return (message) => {
    throw new UsageError(message, command);
  };
}

export function outputFormat(value: string | undefined, command: CommandName): OutputFormat {
  // wide: text, with more columns where a command has them (status and list: `ReadArgs.wide`).
  if (value === undefined || value === 'text' || value === 'wide') return 'text';
  if (value === 'json' || value === 'yaml') return value;
  if (value === 'name' && command !== 'watch') return value;
  const allowed = command === 'watch' ? 'json, yaml, text or wide' : 'json, yaml, name, text or wide';
  throw new UsageError(`-o must be ${allowed}, got ${JSON.stringify(value)}`, command);
}

export function duration(value: string | undefined, command: CommandName, flag = '--timeout'): number | undefined {
  if (value === undefined) return undefined;
  try {
    const ms = parseDuration(value);
    if (ms > 0) return ms;
  } catch {
    // Reported below.
  }
  throw new UsageError(`${flag} must be a duration like 90s, 45m or 1h30m, got ${JSON.stringify(value)}`, command);
}

/** `-f` (at least one, each a file, a directory or `-`) and `-n`. */
export function sources(values: Record<string, unknown>, command: CommandName): Sources {
  const files = (values.file as string[] | undefined) ?? [];
  if (files.length === 0) {
    throw new UsageError(
      '-f FILE is required (a ServedModel YAML file, a directory of them, or - for stdin; -f may be given more than once)',
      command,
    );
  }
  if (files.filter((f) => f === '-').length > 1) throw new UsageError('stdin (-f -) can be read only once', command);
  if (files.some((f) => f === '')) throw new UsageError('-f needs a file name, a directory or -', command);
  const namespace = label(values.namespace as string | undefined, 'namespace', command);
  return { files, ...(namespace ? { namespace } : {}) };
}

/** `--request-timeout 30s`; 0 (as kubectl's) is no bound, as is leaving it out. */
export function requestTimeout(value: string | undefined, command: CommandName): { requestTimeoutMs?: number } {
  if (value === undefined || /^0+[a-z]*$/.test(value.trim())) return {};
  try {
    const ms = parseDuration(value);
    if (ms > 0) return { requestTimeoutMs: ms };
  } catch {
    // Reported below.
  }
  throw new UsageError(
    `--request-timeout must be a duration like 10s or 1m (0: no bound), got ${JSON.stringify(value)}`,
    command,
  );
}

export function noPositionals(positionals: string[], command: CommandName, hint: string): void {
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}: ${hint}`, command);
  }
}

export function refArgs(positionals: string[], values: Record<string, unknown>, command: CommandName): RefArgs {
  if (positionals.length === 0) throw new UsageError('NAME is required (the metadata.name of the model)', command);
  if (positionals.length > 1) {
    throw new UsageError(`one NAME only, got ${positionals.map((p) => JSON.stringify(p)).join(' ')}`, command);
  }
  const name = label(positionals[0], 'NAME', command)!;
  const namespace = label(values.namespace as string | undefined, 'namespace', command) ?? DEFAULT_NAMESPACE;
  const cluster = label(values.cluster as string | undefined, 'cluster', command);
  return { name, namespace, ...(cluster ? { cluster } : {}) };
}

export function label(value: string | undefined, what: string, command: CommandName): string | undefined {
  if (value === undefined) return undefined;
  if (value.length > 63 || !DNS1123_LABEL.test(value)) {
    throw new UsageError(
      `${what} must be a DNS label (lowercase letters, digits and "-"), got ${JSON.stringify(value)}`,
      command,
    );
  }
  return value;
}

/** `--phase Ready` or `--phase ready,degraded`: case-insensitive, canonical spelling out. */
export function phaseList(value: string | undefined, command: CommandName): Phase[] {
  if (value === undefined) return [];
  return value.split(',').map((word) => {
    const phase = PHASES.find((p) => p.toLowerCase() === word.trim().toLowerCase());
    if (!phase)
      throw new UsageError(`--phase must be one of ${PHASES.join(', ')}, got ${JSON.stringify(word)}`, command);
    return phase;
  });
}
