// `ferry serve` and `ferry update`.
import { defaultReadyTimeoutMs, serveModel } from '../serve-model';
import { parseModelDocument } from '../document';
import { updateModel } from '../update-model';
import { waitForPhase } from '../wait-for-phase';
import type { ModelRef } from '../../workflows/messages';
import type { ModelStatus } from '../../workflows/status';
import type { Command } from './args';
import { printJson, type CliContext } from './context';
import { EXIT } from './exit-codes';
import { formatStatus, serveLine } from './format';
import { StatusPrinter } from './status-printer';

type ServeCommand = Extract<Command, { kind: 'serve' }>;
type UpdateCommand = Extract<Command, { kind: 'update' }>;

export async function serveCommand(ctx: CliContext, cmd: ServeCommand, doc: unknown): Promise<number> {
  const result = await serveModel(ctx.client, doc);
  if (cmd.output === 'text') ctx.io.stdout.write(`${serveLine(result)}\n`);
  const status = cmd.wait
    ? await waitUntilReady(ctx, result.ref, cmd.timeoutMs ?? defaultReadyTimeoutMs(parseModelDocument(doc)))
    : undefined;
  if (cmd.output === 'json') {
    printJson(ctx, { workflowId: result.workflowId, runId: result.runId, started: result.started, status });
  } else if (status) {
    ctx.io.stdout.write(`${formatStatus(status, ctx.io.now())}\n`);
  }
  return EXIT.ok;
}

export async function updateCommand(ctx: CliContext, cmd: UpdateCommand, doc: unknown): Promise<number> {
  const result = await updateModel(ctx.client, doc);
  if (cmd.output === 'text') {
    const what = result.changed
      ? `generation ${result.generation}: ${result.changes.join(', ')} changed${result.sourceChanged ? ' (new weights: the engine stops while they download)' : ''}`
      : `generation ${result.generation}: no change`;
    ctx.io.stdout.write(`updated ${result.ref.namespace}/${result.ref.name}: ${what}\n`);
  }
  const status = cmd.wait
    ? await waitUntilReady(
        ctx,
        result.ref,
        cmd.timeoutMs ?? defaultReadyTimeoutMs(parseModelDocument(doc)),
        result.generation,
      )
    : undefined;
  if (cmd.output === 'json') {
    const { ref: _ref, ...update } = result;
    printJson(ctx, { ...update, status });
  } else if (status) {
    ctx.io.stdout.write(`${formatStatus(status, ctx.io.now())}\n`);
  }
  return EXIT.ok;
}

/** Waits for Ready, following progress on stderr (stdout stays for the result). */
async function waitUntilReady(
  ctx: CliContext,
  ref: ModelRef,
  timeoutMs: number,
  generation?: number,
): Promise<ModelStatus> {
  const printer = new StatusPrinter(ctx.io.stderr, ctx.io.now);
  try {
    return await waitForPhase(ctx.client, ref, ['Ready'], {
      timeoutMs,
      ...(generation !== undefined ? { generation } : {}),
      onStatus: (status) => printer.update(status),
      onNoWorker: (err) => ctx.io.stderr.write(`warning: ${err.message}; still waiting\n`),
      signal: ctx.io.signal,
    });
  } finally {
    printer.finish();
  }
}
