// `ferry status` and `ferry list`, each once or, with -w, as a watch (status-watch.ts, list-watch.ts).
import { listModels, type ModelSummary } from '../list-models.js';
import { getModelStatus } from '../model-status.js';
import type { Command } from './args.js';
import { resolveRef, webUiLink, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { formatList, formatStatus } from './format.js';
import { watchList } from './list-watch.js';
import { watchStatus } from './status-watch.js';

export async function statusCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'status' }>): Promise<number> {
  const ref = await resolveRef(ctx, cmd.ref);
  const status = await getModelStatus(ctx.client, ref);
  if (cmd.watch) return watchStatus(ctx, cmd, ref, status);
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, status);
  else if (cmd.output === 'name') printName(ctx, ref);
  else ctx.io.stdout.write(`${formatStatus(status, ctx.io.now(), webUiLink(ctx, ref), { wide: cmd.wide === true })}\n`);
  return EXIT.ok;
}

export async function listCommand(ctx: CliContext, cmd: Extract<Command, { kind: 'list' }>): Promise<number> {
  // Said once per model, not once per read of a watch.
  const unread = new Set<string>();
  const read = () => readList(ctx, cmd, unread);
  const models = await read();
  if (cmd.watch) return watchList(ctx, cmd, read, models);
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, models);
  else if (cmd.output === 'name') for (const model of models) printName(ctx, model);
  else ctx.io.stdout.write(`${formatList(models, ctx.io.now(), cmd.namespace, { wide: cmd.wide === true })}\n`);
  return EXIT.ok;
}

/** The models `cmd` asks for, with their statuses; with -l, a warning for each whose labels could not be read. */
function readList(
  ctx: CliContext,
  cmd: Extract<Command, { kind: 'list' }>,
  unread: Set<string>,
): Promise<ModelSummary[]> {
  return listModels(
    ctx.client,
    {
      ...(cmd.phases.length > 0 ? { phase: cmd.phases } : {}),
      ...(cmd.namespace ? { namespace: cmd.namespace } : {}),
      ...(cmd.cluster ? { cluster: cmd.cluster } : {}),
      includeClosed: cmd.includeDeleted,
      ...(cmd.selector !== undefined ? { selector: cmd.selector } : {}),
    },
    {
      withStatus: true,
      onUnreadLabels: (model, err) => {
        if (unread.has(model.workflowId)) return;
        unread.add(model.workflowId);
        ctx.io.stderr.write(
          `warning: left out ${model.namespace}/${model.name} (cluster ${model.cluster}): its labels could not be ` +
            `read for -l (${err instanceof Error ? err.message : String(err)})\n`,
        );
      },
    },
  );
}
