// `ferry rollout ACTION NAME`'s own arguments (docs/design/rollout.md): pure, as args.ts is.

const ROLLOUT_ACTIONS = ['status', 'approve', 'abort', 'undo'] as const;

/** The command's own flags, beside -n and --cluster. */
export const ROLLOUT_OPTIONS = {
  revision: { type: 'string' },
  reason: { type: 'string' },
  'keep-weights': { type: 'boolean' },
} as const;

export interface RolloutArgs {
  /** status: where the rollout stands; approve, abort: a word on it; undo: back to the revision before. */
  action: (typeof ROLLOUT_ACTIONS)[number];
  /** Act only if this is the candidate (undo: the revision before). */
  revision?: string;
  reason?: string;
  /** abort: keep the candidate's volume. */
  keepWeights?: true;
}

/** The action (the first positional) and its flags; `usage` throws the command's usage error. */
export function rolloutArgs(
  action: string | undefined,
  str: (key: string) => string | undefined,
  usage: (message: string) => never,
  keepWeights = false,
): RolloutArgs {
  if (!ROLLOUT_ACTIONS.includes(action as RolloutArgs['action'])) {
    usage(`rollout takes ${ROLLOUT_ACTIONS.join(', ')} first, then NAME; got ${JSON.stringify(action ?? '')}`);
  }
  const revision = str('revision');
  const reason = str('reason');
  if (revision !== undefined && !/^r[1-9]\d{0,8}$/.test(revision)) {
    usage(`--revision names a revision like r2, got ${JSON.stringify(revision)}`);
  }
  if (action === 'status' && (revision !== undefined || reason !== undefined)) {
    usage('rollout status takes no --revision or --reason');
  }
  if (keepWeights && action !== 'abort') usage(`--keep-weights is for rollout abort, not rollout ${action}`);
  return {
    action: action as RolloutArgs['action'],
    ...(keepWeights ? { keepWeights } : {}),
    ...(revision !== undefined ? { revision } : {}),
    ...(reason ? { reason } : {}),
  };
}
