// `ferry move NAME --to CLUSTER [--wait]`, `ferry move NAME --status` and `--abort` (docs/design/fleet.md, section 3).
import { abortMove, moveResult, moveStatus, startMove } from '../move-model.js';
import { describeRef, WaitTimeoutError } from '../errors.js';
import type { ModelRef, MoveModelResult, MoveStatus } from '../../workflows/contract/index.js';
import { UsageError, type Command, type MoveAction } from './args.js';
import type { ModelDocument } from './read-document.js';
import { resolveRef, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';

type MoveCommand = Extract<Command, { kind: 'move' }>;
type Start = Extract<MoveAction, { action: 'start' }>;

/** How often `--wait` reads the move's status for its step lines. */
const FOLLOW_INTERVAL_MS = 2_000;

/** `docs`: the model's document of `-f FILE` (at most one; read and checked by the CLI before the command runs). */
export async function moveCommand(ctx: CliContext, cmd: MoveCommand, docs: ModelDocument[] = []): Promise<number> {
  const { name, namespace } = cmd.ref;
  if (cmd.action === 'start') return startCommand(ctx, cmd, cmd, docs);
  if (cmd.action === 'status') {
    const status = await moveStatus(ctx.client, { name, namespace });
    if (isStructured(cmd.output)) printStructured(ctx, cmd.output, status);
    else if (cmd.output === 'name') printName(ctx, cmd.ref);
    else ctx.io.stdout.write(`${moveLines(status)}\n`);
    return EXIT.ok;
  }
  const status = await abortMove(ctx.client, { name, namespace });
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, status);
  else if (cmd.output === 'name') printName(ctx, cmd.ref);
  else if (status.step === 'aborted') {
    ctx.io.stdout.write(
      `${describeRef(status.from)}: move aborted; the model on cluster ${status.to.cluster} was deleted, this one is as it was\n`,
    );
  }
  if (status.step === 'aborted') return EXIT.ok;
  // Past the switch a move completes: the abort changed nothing, and says so.
  if (!isStructured(cmd.output)) {
    ctx.io.stderr.write(
      `error: the move had begun its teardown, which an abort does not stop: it ended ${status.step}` +
        `${status.step === 'done' ? `, the model serves on cluster ${status.to.cluster}` : ''}\n`,
    );
  }
  return EXIT.failed;
}

async function startCommand(ctx: CliContext, cmd: MoveCommand, start: Start, docs: ModelDocument[]): Promise<number> {
  if (docs.length > 1) throw new UsageError(`-f holds ${docs.length} documents: give the moving model's alone`, 'move');
  const from = await resolveRef(ctx, cmd.ref);
  const handle = await startMove(ctx.client, from, start.to, {
    ...(start.readyTimeoutMs !== undefined ? { readyTimeoutMs: start.readyTimeoutMs } : {}),
    ...(docs[0] ? { document: docs[0].doc } : {}),
  });
  const to: ModelRef = { ...from, cluster: start.to };
  if (!start.wait) {
    if (isStructured(cmd.output)) printStructured(ctx, cmd.output, { workflowId: handle.workflowId, from, to });
    else if (cmd.output === 'name') printName(ctx, from);
    else {
      const again = `ferry move ${from.name} -n ${from.namespace}`;
      ctx.io.stdout.write(
        `moving ${describeRef(from)} to cluster ${start.to}: started workflow ${handle.workflowId}\n` +
          `  follow it: ${again} --status; stop it before its teardown: ${again} --abort\n`,
      );
    }
    return EXIT.ok;
  }
  if (cmd.output === 'text') {
    ctx.io.stderr.write(`moving ${describeRef(from)} to cluster ${start.to} (workflow ${handle.workflowId})…\n`);
  }
  const result = await followed(ctx, cmd, start, from, () => moveResult(handle));
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, result);
  else if (cmd.output === 'name') printName(ctx, to);
  else ctx.io.stdout.write(`${movedLine(result)}\n`);
  return EXIT.ok;
}

/**
 * The move's result, with a line on stderr for each step it enters (text output), until `--timeout` (the move goes on)
 * or Ctrl-C.
 */
async function followed(
  ctx: CliContext,
  cmd: MoveCommand,
  start: Start,
  from: ModelRef,
  result: () => Promise<MoveModelResult>,
): Promise<MoveModelResult> {
  const { name, namespace } = cmd.ref;
  let said = 0;
  const say = (status: MoveStatus) => {
    for (const entry of status.timeline.slice(said)) {
      ctx.io.stderr.write(`  ${entry.step}${entry.detail ? `: ${entry.detail}` : ''}\n`);
    }
    said = Math.max(said, status.timeline.length);
  };
  const outcome = result();
  outcome.catch(() => undefined);
  const deadline = start.timeoutMs === undefined ? Infinity : Date.now() + start.timeoutMs;
  for (;;) {
    const settled = await Promise.race([
      outcome.then(() => true),
      pause(Math.min(FOLLOW_INTERVAL_MS, deadline - Date.now()), ctx.io.signal).then(() => false),
    ]).catch((err: unknown) => {
      if (ctx.io.signal.aborted) throw err;
      return true; // the move failed: `outcome` says how, below
    });
    if (cmd.output === 'text') {
      const status = await moveStatus(ctx.client, { name, namespace }).catch(() => undefined);
      if (status) say(status);
    }
    if (settled) return await outcome;
    if (Date.now() >= deadline) {
      throw new WaitTimeoutError(from, start.timeoutMs!, 'finish its move', undefined, 'the move goes on');
    }
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      signal.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal.reason as Error);
    }
    signal.addEventListener('abort', abort, { once: true });
  });
}

/** What `--wait` says when the move is done. */
export function movedLine(result: MoveModelResult): string {
  const kept = result.retained.length ? `; kept there: ${result.retained.join(', ')}` : '';
  const pending = result.teardownPending
    ? `; its teardown on ${result.from.cluster} goes on (that cluster has not finished it)`
    : '';
  return `${describeRef(result.from)} moved to cluster ${result.to.cluster}: serving at ${result.endpoint}${kept}${pending}`;
}

/** `--status`: the move's step, then one line per step with its times and detail. */
export function moveLines(status: MoveStatus): string {
  const lines = [
    `${status.from.namespace}/${status.from.name}: ${status.from.cluster} → ${status.to.cluster}, ${status.step}` +
      `${status.endpoint ? `; serving on ${status.to.cluster} at ${status.endpoint}` : ''}`,
  ];
  for (const e of status.timeline) {
    const took = e.endedAt ? ` (${seconds(Date.parse(e.endedAt) - Date.parse(e.startedAt))})` : ' (under way)';
    lines.push(`  ${e.startedAt}  ${e.step.padEnd(8)}${took}${e.detail ? `  ${e.detail}` : ''}`);
  }
  if (status.error) lines.push(`  ${status.error.reason}: ${status.error.message}`);
  return lines.join('\n');
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10}s`;
