// `ferry serve`, `ferry update` and `ferry apply`.
import { applyModel } from '../apply-model.js';
import { defaultReadyTimeoutMs, serveModel } from '../serve-model.js';
import { parseModelDocument } from '../document.js';
import { updateModelAfter } from '../update-model.js';
import { waitForPhase } from '../wait-for-phase.js';
import type { ModelRef, ModelStatus, UpdateResult } from '../../workflows/contract/index.js';
import type { Command } from './args.js';
import type { CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { formatStatus, serveLine } from './format.js';
import { changeLine, shortRef, updatedLine } from './lines.js';
import { StatusPrinter } from './status-printer.js';

type ServeCommand = Extract<Command, { kind: 'serve' }>;
type UpdateCommand = Extract<Command, { kind: 'update' }>;
type ApplyCommand = Extract<Command, { kind: 'apply' }>;

export async function serveCommand(ctx: CliContext, cmd: ServeCommand, doc: unknown): Promise<number> {
  const result = await serveModel(ctx.client, doc);
  if (cmd.output === 'text') ctx.io.stdout.write(`${serveLine(result)}\n`);
  const status = cmd.wait
    ? await waitUntilReady(ctx, result.ref, cmd.timeoutMs ?? defaultReadyTimeoutMs(parseModelDocument(doc)))
    : undefined;
  if (isStructured(cmd.output)) {
    const { workflowId, runId, started } = result;
    printStructured(ctx, cmd.output, { workflowId, runId, started, status });
  } else if (cmd.output === 'name') {
    printName(ctx, result.ref);
  } else if (status) {
    ctx.io.stdout.write(`${formatStatus(status, ctx.io.now())}\n`);
  }
  return EXIT.ok;
}

export async function updateCommand(ctx: CliContext, cmd: UpdateCommand, doc: unknown): Promise<number> {
  const result = await updateModelAfter(ctx.early, ctx.client, doc);
  if (cmd.output === 'text') ctx.io.stdout.write(`${updatedLine(result.ref, result)}\n`);
  return finishChange(ctx, cmd, doc, result);
}

export async function applyCommand(ctx: CliContext, cmd: ApplyCommand, doc: unknown): Promise<number> {
  const result = await applyModel(ctx.client, doc);
  if (cmd.output === 'text') {
    ctx.io.stdout.write(
      result.started ? `${serveLine(result)}\n` : `applied to ${shortRef(result.ref)}: ${changeLine(result)}\n`,
    );
  }
  return finishChange(ctx, cmd, doc, result);
}

/** After an update or apply: `--wait` for Ready at its generation, then print the result. */
async function finishChange(
  ctx: CliContext,
  cmd: UpdateCommand | ApplyCommand,
  doc: unknown,
  result: UpdateResult & { ref: ModelRef },
): Promise<number> {
  const status = cmd.wait
    ? await waitUntilReady(
        ctx,
        result.ref,
        cmd.timeoutMs ?? defaultReadyTimeoutMs(parseModelDocument(doc)),
        result.generation,
      )
    : undefined;
  if (isStructured(cmd.output)) {
    const { ref: _ref, ...change } = result;
    printStructured(ctx, cmd.output, { ...change, status });
  } else if (cmd.output === 'name') {
    printName(ctx, result.ref);
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
      onRetry: (err) =>
        ctx.io.stderr.write(`warning: cannot read the status right now (${err.message}); still waiting\n`),
      signal: ctx.io.signal,
    });
  } finally {
    printer.finish();
  }
}
