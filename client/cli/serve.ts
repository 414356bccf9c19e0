// `ferry serve`, `ferry update` and `ferry apply`, for each document of -f in order.
import { applyModel } from '../apply-model.js';
import type { Placement } from '../place-model.js';
import { ConnectError, FerryClientError } from '../errors.js';
import { defaultReadyTimeoutMs, serveModel } from '../serve-model.js';
import { updateModelAfter } from '../update-model.js';
import { waitForPhase } from '../wait-for-phase.js';
import type { ModelRef, ModelStatus, ServedModel } from '../../workflows/contract/index.js';
import type { Command } from './args.js';
import type { CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { exitCodeOf } from './exit-of.js';
import { errorLines, formatStatus, serveLine } from './format.js';
import { changeLine, shortRef, updatedLine } from './lines.js';
import type { ModelDocument } from './read-document.js';
import { withoutRequestTimeout } from './request-timeout.js';
import { StatusPrinter } from './status-printer.js';

type DocumentCommand = Extract<Command, { kind: 'serve' | 'update' | 'apply' }>;

/** What the command did with one document: its one line, its result as data, and what to wait for. */
interface Sent {
  ref: ModelRef;
  spec: ServedModel;
  line: string;
  /** What -o json and -o yaml print (with the status after --wait). */
  data: Record<string, unknown>;
  /** The generation to wait for (update, apply). */
  generation?: number;
}

/**
 * Sends each document in order, then with --wait waits for each model (all of them are on their way meanwhile).
 * One document prints what it always has; several print a line each, or one array (-o json, -o yaml). A document
 * that fails does not stop the next: the exit code is the worst of all.
 */
export async function documentsCommand(ctx: CliContext, cmd: DocumentCommand, docs: ModelDocument[]): Promise<number> {
  const several = docs.length > 1;
  let code: number = EXIT.ok;
  // One document: its error ends the command, as it always has (run.ts reports it).
  const attempt = async <T>(step: () => Promise<T>): Promise<T | undefined> => {
    if (!several) return step();
    try {
      return await step();
    } catch (err) {
      code = Math.max(code, reported(ctx, err));
      return undefined;
    }
  };
  const results: { sent: Sent; status?: ModelStatus }[] = [];
  for (const document of docs) {
    const sent = await attempt(() => send(ctx, cmd, document));
    if (!sent) continue;
    if (cmd.output === 'text') ctx.io.stdout.write(`${sent.line}\n`);
    results.push({ sent });
  }
  if (cmd.wait) {
    for (const result of results) {
      const { ref, spec, generation } = result.sent;
      result.status = await attempt(() =>
        waitUntilReady(ctx, ref, cmd.timeoutMs ?? defaultReadyTimeoutMs(spec), generation),
      );
    }
  }
  const waited = results.filter((r) => !cmd.wait || r.status);
  if (isStructured(cmd.output)) {
    const data = waited.map(({ sent, status }) => ({ ...sent.data, status }));
    printStructured(ctx, cmd.output, several ? data : data[0]);
  } else if (cmd.output === 'name') {
    for (const { sent } of waited) printName(ctx, sent.ref);
  } else {
    const statuses = waited.flatMap(({ status }) => (status ? [formatStatus(status, ctx.io.now())] : []));
    if (statuses.length > 0) ctx.io.stdout.write(`${statuses.join('\n\n')}\n`);
  }
  return code;
}

/**
 * A failure of one model among several, on stderr; its exit code. A failure of the connection or of a request
 * (not of a model) is the command's: thrown on, for run.ts to report.
 */
function reported(ctx: CliContext, err: unknown): number {
  if (!(err instanceof FerryClientError) || err instanceof ConnectError || ctx.requestTimedOut?.()) throw err;
  ctx.io.stderr.write(`${errorLines(err)}\n`);
  return exitCodeOf(err);
}

async function send(ctx: CliContext, cmd: DocumentCommand, { doc, spec }: ModelDocument): Promise<Sent> {
  if (cmd.kind === 'serve') {
    const result = await serveModel(ctx.client, doc);
    const { ref, workflowId, runId, started, placement } = result;
    return {
      ref,
      spec,
      line: placed(placement, serveLine(result)),
      data: { workflowId, runId, started, ...(placement ? { placement } : {}) },
    };
  }
  if (cmd.kind === 'update') {
    const { ref, ...change } = await updateModelAfter(ctx.early, ctx.client, doc);
    return { ref, spec, line: updatedLine(ref, change), data: change, generation: change.generation };
  }
  const { ref, ...change } = await applyModel(ctx.client, doc);
  const line = change.started ? serveLine({ ref, ...change }) : `applied to ${shortRef(ref)}: ${changeLine(change)}`;
  return {
    ref,
    spec,
    line: placed(change.placement, line),
    data: change,
    generation: change.generation,
  };
}

/** With `spec.placement`: first where the model went and why, then the command's own line. */
function placed(placement: Placement | undefined, line: string): string {
  if (!placement) return line;
  const why = placement.placed ? `placed on cluster ${placement.cluster}: ${placement.reason}` : placement.reason;
  return `${why}\n${line}`;
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
    return await withoutRequestTimeout(() =>
      waitForPhase(ctx.client, ref, ['Ready'], {
        timeoutMs,
        ...(generation !== undefined ? { generation } : {}),
        onStatus: (status) => printer.update(status),
        onNoWorker: (err) => ctx.io.stderr.write(`warning: ${err.message}; still waiting\n`),
        onRetry: (err) =>
          ctx.io.stderr.write(`warning: cannot read the status right now (${err.message}); still waiting\n`),
        signal: ctx.io.signal,
      }),
    );
  } finally {
    printer.finish();
  }
}
