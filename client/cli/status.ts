// `ferry status` and `ferry list`.
import { listModels } from '../list-models.js';
import { getModelStatus } from '../model-status.js';
import type { Command } from './args.js';
import { resolveRef, webUiLink, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { formatList, formatStatus } from './format.js';

export async function statusCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'status' }>): Promise<number> {
  const ref = await resolveRef(ctx, cmd.ref);
  const status = await getModelStatus(ctx.client, ref);
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, status);
  else if (cmd.output === 'name') printName(ctx, ref);
  else ctx.io.stdout.write(`${formatStatus(status, ctx.io.now(), webUiLink(ctx, ref))}\n`);
  return EXIT.ok;
}

export async function listCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'list' }>): Promise<number> {
  const models = await listModels(
    ctx.client,
    {
      ...(cmd.phases.length > 0 ? { phase: cmd.phases } : {}),
      ...(cmd.namespace ? { namespace: cmd.namespace } : {}),
      ...(cmd.cluster ? { cluster: cmd.cluster } : {}),
      includeClosed: cmd.includeDeleted,
    },
    { withStatus: true },
  );
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, models);
  else if (cmd.output === 'name') for (const model of models) printName(ctx, model);
  else ctx.io.stdout.write(`${formatList(models, ctx.io.now(), cmd.namespace)}\n`);
  return EXIT.ok;
}
