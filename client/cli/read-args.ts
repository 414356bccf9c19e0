// The flags `status` and `list` share (-w/--watch, --watch-only, --timeout, -o wide) and list's -l/--selector,
// parsed for args.ts. Pure, and as light as the parser: `ferry --help` loads it too.
import type { ParseArgsConfig } from 'node:util';
import { parseLabelSelector } from '../label-selector.js';

/** What `status` and `list` print as text: `-o wide` adds columns (list) and fields (status). */
export interface ReadArgs {
  wide?: true;
  /** -w/--watch, as `kubectl get -w`: the current state, then a line each time it changes. */
  watch?: WatchArgs;
}

interface WatchArgs {
  /** --watch-only: the changes, not the current state first. */
  only: boolean;
  /** --timeout: how long to watch (default: until Ctrl-C). */
  timeoutMs?: number;
}

export const WATCH_OPTIONS = {
  watch: { type: 'boolean', short: 'w' },
  'watch-only': { type: 'boolean' },
  timeout: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/** `-o wide`, and -w/--watch-only with the --timeout that only a watch takes. */
export function readArgs(
  values: Record<string, string | boolean | string[] | undefined>,
  timeoutMs: number | undefined,
  fail: (message: string) => never,
): ReadArgs {
  const watch = values.watch === true || values['watch-only'] === true;
  if (!watch && timeoutMs !== undefined) {
    fail('--timeout is how long -w/--watch watches: add -w, or drop --timeout');
  }
  return {
    ...(values.output === 'wide' ? { wide: true } : {}),
    ...(watch
      ? { watch: { only: values['watch-only'] === true, ...(timeoutMs !== undefined ? { timeoutMs } : {}) } }
      : {}),
  };
}

/** `-l`: checked now, so a bad selector is bad usage (exit 2) before anything connects. */
export function labelSelector(value: string | undefined, fail: (message: string) => never): string | undefined {
  if (value === undefined) return undefined;
  try {
    parseLabelSelector(value);
  } catch (err) {
    fail(`-l/--selector: ${(err as Error).message}`);
  }
  return value;
}
