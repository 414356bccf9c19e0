// `ferry status NAME -w`: the status, then what changes, as `ferry watch` prints it (its lines, with ready replicas
// in them), but with no phase to reach: until Ctrl-C or --timeout.
import { stringify } from 'yaml';
import type { ModelRef, ModelStatus } from '../../workflows/contract/index.js';
import { getModelStatus } from '../model-status.js';
import type { Command } from './args.js';
import { webUiLink, type CliContext } from './context.js';
import { EXIT } from './exit-codes.js';
import { formatStatus } from './format.js';
import { printName } from './output.js';
import { poll } from './poll.js';
import { StatusPrinter } from './status-printer.js';

/** As often as `ferry watch` reads the status; a failing read backs off to `MAX_INTERVAL_MS`. */
const INTERVAL_MS = 1_000;
const MAX_INTERVAL_MS = 30_000;

export async function watchStatus(
  ctx: CliContext,
  cmd: Extract<Command, { kind: 'status' }>,
  ref: ModelRef,
  first: ModelStatus,
): Promise<number> {
  const { only, timeoutMs } = cmd.watch!;
  const printer = new StatusPrinter(ctx.io.stdout, ctx.io.now, { replicas: true });
  const show = shower(ctx, cmd, ref, printer);
  if (!only) {
    if (cmd.output === 'text') {
      ctx.io.stdout.write(`${formatStatus(first, ctx.io.now(), webUiLink(ctx, ref), { wide: cmd.wide === true })}\n`);
    } else {
      show(undefined, first);
    }
  }
  printer.shown(first);
  let last = first;
  try {
    await poll(
      () => getModelStatus(ctx.client, ref),
      (status) => {
        show(last, status);
        last = status;
      },
      {
        intervalMs: INTERVAL_MS,
        maxIntervalMs: MAX_INTERVAL_MS,
        deadline: Date.now() + (timeoutMs ?? Infinity),
        signal: ctx.io.signal,
        onRetry: (err, retryInMs) =>
          ctx.io.stderr.write(
            `warning: cannot read the status right now (${err.message}); still watching, next read in ${retryInMs / 1_000}s\n`,
          ),
      },
    );
  } finally {
    printer.finish();
  }
  return EXIT.ok;
}

/**
 * How one more status is shown: text, the printer's lines; -o json, one status a line, and -o yaml a document each,
 * when anything in it changed (as `ferry watch`); -o name, the name when phase, ready replicas or generation did.
 */
function shower(
  ctx: CliContext,
  cmd: Extract<Command, { kind: 'status' }>,
  ref: ModelRef,
  printer: StatusPrinter,
): (previous: ModelStatus | undefined, status: ModelStatus) => void {
  const out = ctx.io.stdout;
  const changed = (previous: ModelStatus | undefined, status: ModelStatus) =>
    JSON.stringify(previous) !== JSON.stringify(status);
  switch (cmd.output) {
    case 'text':
      return (_, status) => printer.update(status);
    case 'json':
      return (previous, status) => changed(previous, status) && out.write(`${JSON.stringify(status)}\n`);
    case 'yaml':
      return (previous, status) =>
        changed(previous, status) && out.write(`---\n${stringify(status, { lineWidth: 0 })}`);
    case 'name':
      return (previous, status) => {
        const row = (s: ModelStatus | undefined) => s && [s.phase, s.readyReplicas, s.replicas, s.generation].join();
        if (row(previous) !== row(status)) printName(ctx, ref);
      };
  }
}
