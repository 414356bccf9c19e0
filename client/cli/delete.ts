// `ferry delete NAME`, and `ferry delete -f FILE…`: the models the documents name.
import { type DeleteModelResult, deleteModelAfter } from '../delete-model.js';
import { ConnectError, describeRef, FerryClientError } from '../errors.js';
import { notPlaced, servedDocument } from '../place-model.js';
import { modelRefOf, type ModelRef } from '../../workflows/contract/index.js';
import type { Command } from './args.js';
import { resolveRef, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { exitCodeOf } from './exit-of.js';
import { errorLines } from './format.js';
import { deletingLine } from './lines.js';
import type { ModelDocument } from './read-document.js';

type DeleteCommand = Extract<Command, { kind: 'delete' }>;

export async function deleteCommand(ctx: CliContext, cmd: DeleteCommand, docs: ModelDocument[]): Promise<number> {
  if (!('ref' in cmd)) return deleteDocuments(ctx, cmd, docs);
  const ref = await resolveRef(ctx, cmd.ref);
  if (cmd.wait && cmd.output === 'text') ctx.io.stderr.write(`deleting ${describeRef(ref)}…\n`);
  const result = await deleteOne(ctx, cmd, ref);
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, result);
  else if (cmd.output === 'name') printName(ctx, ref);
  else ctx.io.stdout.write(`${deletedLine(cmd, result)}\n`);
  return EXIT.ok;
}

/**
 * The models of the documents (their name, namespace and cluster), all at once; with --wait, until every one is
 * gone. Printed in the documents' order; one that fails does not stop the others, and the exit code is the worst.
 */
async function deleteDocuments(ctx: CliContext, cmd: DeleteCommand, docs: ModelDocument[]): Promise<number> {
  const refs = await Promise.all(docs.map((d) => servedRef(ctx, d)));
  if (refs.length === 1) return deleteCommand(ctx, { ...cmd, ref: refs[0]! }, []);
  if (cmd.wait && cmd.output === 'text') ctx.io.stderr.write(`deleting ${refs.map(describeRef).join(', ')}…\n`);
  const outcomes = await Promise.allSettled(refs.map((ref) => deleteOne(ctx, cmd, ref)));
  let code: number = EXIT.ok;
  const results: DeleteModelResult[] = [];
  for (const outcome of outcomes) {
    if (outcome.status === 'fulfilled') {
      results.push(outcome.value);
      continue;
    }
    const err: unknown = outcome.reason;
    // The connection's failure, or a request's, is the command's: run.ts reports it once.
    if (!(err instanceof FerryClientError) || err instanceof ConnectError || ctx.requestTimedOut?.()) throw err;
    ctx.io.stderr.write(`${errorLines(err)}\n`);
    code = Math.max(code, exitCodeOf(err));
  }
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, results);
  else if (cmd.output === 'name') for (const { ref } of results) printName(ctx, ref);
  else ctx.io.stdout.write(results.map((r) => `${deletedLine(cmd, r)}\n`).join(''));
  return code;
}

/** The document's model: a placed one's on the listed cluster that serves it. */
async function servedRef(ctx: CliContext, { doc, spec }: ModelDocument): Promise<ModelRef> {
  const served = await servedDocument(ctx.client, doc, spec);
  if (!served.running) throw notPlaced(served.spec);
  return modelRefOf(served.spec);
}

function deleteOne(ctx: CliContext, cmd: DeleteCommand, ref: ModelRef): Promise<DeleteModelResult> {
  return deleteModelAfter(ctx.early, ctx.client, ref, {
    wait: cmd.wait,
    ...(cmd.timeoutMs !== undefined ? { timeoutMs: cmd.timeoutMs } : {}),
    ...(cmd.reason ? { reason: cmd.reason } : {}),
    signal: ctx.io.signal,
  });
}

/** What a delete says once done: what it deleted and retained, with --wait. */
function deletedLine(cmd: DeleteCommand, result: DeleteModelResult): string {
  const { ref, teardown } = result;
  const objects = teardown
    ? `: deleted ${teardown.deleted.join(', ') || 'nothing'}${teardown.retained.length ? `; retained ${teardown.retained.join(', ')}` : ''}`
    : '';
  return result.alreadyDeleted
    ? `${describeRef(ref)} was already deleted${objects}`
    : cmd.wait
      ? `deleted ${describeRef(ref)}${objects}`
      : deletingLine(ref);
}
