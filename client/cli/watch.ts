// `ferry watch`: follow a model until it is Ready, Failed or Deleted.
import { describeRef, ModelFailedError } from '../errors.js';
import { waitForPhase } from '../wait-for-phase.js';
import type { Command } from './args.js';
import { resolveRef, type CliContext } from './context.js';
import { EXIT } from './exit-codes.js';
import { errorLines } from './format.js';
import { StatusPrinter } from './status-printer.js';
import { stringify } from 'yaml';

export async function watchCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'watch' }>): Promise<number> {
  const ref = await resolveRef(ctx, cmd.ref);
  const json = cmd.output === 'json';
  const data = json || cmd.output === 'yaml';
  const printer = new StatusPrinter(ctx.io.stdout, ctx.io.now);
  if (!data) ctx.io.stdout.write(`watching ${describeRef(ref)} (Ctrl-C to stop)\n`);
  try {
    const status = await waitForPhase(ctx.client, ref, ['Ready', 'Failed', 'Deleted'], {
      timeoutMs: cmd.timeoutMs ?? Infinity,
      // JSON: one status per line; YAML: one document per status.
      onStatus: (s) =>
        json
          ? ctx.io.stdout.write(`${JSON.stringify(s)}\n`)
          : data
            ? ctx.io.stdout.write(`---\n${stringify(s, { lineWidth: 0 })}`)
            : printer.update(s),
      onNoWorker: (err) => ctx.io.stderr.write(`warning: ${err.message}; still watching\n`),
      onRetry: (err) =>
        ctx.io.stderr.write(`warning: cannot read the status right now (${err.message}); still watching\n`),
      signal: ctx.io.signal,
    });
    if (status.phase === 'Failed') {
      ctx.io.stderr.write(`${errorLines(new ModelFailedError(ref, status.lastError, status))}\n`);
      return EXIT.failed;
    }
    return EXIT.ok;
  } finally {
    printer.finish();
  }
}
