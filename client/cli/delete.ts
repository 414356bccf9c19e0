// `ferry delete`.
import { deleteModelAfter } from '../delete-model.js';
import { describeRef } from '../errors.js';
import type { Command } from './args.js';
import { resolveRef, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { deletingLine } from './lines.js';

export async function deleteCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'delete' }>): Promise<number> {
  const ref = await resolveRef(ctx, cmd.ref);
  if (cmd.wait && cmd.output === 'text') ctx.io.stderr.write(`deleting ${describeRef(ref)}…\n`);
  const result = await deleteModelAfter(ctx.early, ctx.client, ref, {
    wait: cmd.wait,
    ...(cmd.timeoutMs !== undefined ? { timeoutMs: cmd.timeoutMs } : {}),
    ...(cmd.reason ? { reason: cmd.reason } : {}),
    signal: ctx.io.signal,
  });
  if (isStructured(cmd.output)) {
    printStructured(ctx, cmd.output, result);
    return EXIT.ok;
  }
  if (cmd.output === 'name') {
    printName(ctx, ref);
    return EXIT.ok;
  }
  const { teardown } = result;
  const objects = teardown
    ? `: deleted ${teardown.deleted.join(', ') || 'nothing'}${teardown.retained.length ? `; retained ${teardown.retained.join(', ')}` : ''}`
    : '';
  const line = result.alreadyDeleted
    ? `${describeRef(ref)} was already deleted${objects}`
    : cmd.wait
      ? `deleted ${describeRef(ref)}${objects}`
      : deletingLine(ref);
  ctx.io.stdout.write(`${line}\n`);
  return EXIT.ok;
}
