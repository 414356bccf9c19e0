// `--dry-run`'s value, as kubectl takes it. Pure; apart from args.ts to keep that file readable.

/** kubectl's dry-run strategies that apply to Ferry (`none` is not giving the flag). */
export const DRY_RUNS = ['client', 'server'] as const;
export type DryRun = (typeof DRY_RUNS)[number];

/**
 * `--dry-run` without a value means `--dry-run=client`, as kubectl's: node's parser has no optional values, so a bare
 * flag (last, or before another flag) is given that value before parsing. `--dry-run server` still takes its value.
 */
export function withDryRunDefault(args: readonly string[]): string[] {
  return args.map((arg, i) => {
    const next = args[i + 1];
    return arg === '--dry-run' && (next === undefined || next.startsWith('-')) ? '--dry-run=client' : arg;
  });
}

export function dryRunOf(value: string | undefined, fail: (message: string) => never): DryRun | undefined {
  if (value === undefined || (DRY_RUNS as readonly string[]).includes(value)) return value as DryRun | undefined;
  return fail(
    '--dry-run must be client (check the document and print the objects Ferry would create, offline) or server ' +
      `(the same, checked by the worker of the model's cluster and the Kubernetes API server), got ${JSON.stringify(value)}`,
  );
}
