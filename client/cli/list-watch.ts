// `ferry list -w`: the table, then a row each time a model's phase, ready replicas or generation change, or a model
// appears or leaves the list, as `kubectl get -w` prints them; until Ctrl-C or --timeout. Visibility cannot be
// subscribed to: the list is read again every INTERVAL_MS (and the statuses with it).
import { WorkflowNotFoundError } from '@temporalio/client';
import { stringify } from 'yaml';
import { PHASES } from '../../workflows/contract/index.js';
import { type ModelSummary, summaryOf } from '../list-models.js';
import { describeModel } from '../model-status.js';
import { ModelNotFoundError } from '../errors.js';
import type { Command } from './args.js';
import type { CliContext } from './context.js';
import { EXIT } from './exit-codes.js';
import { alignedRow, columnWidths, emptyList, type ListColumns, listHeader, listRow } from './format.js';
import { printName } from './output.js';
import { poll } from './poll.js';

/** Between reads of the list (`ferry list --help` says so); a failing read backs off to `MAX_INTERVAL_MS`. */
const INTERVAL_MS = 2_000;
const MAX_INTERVAL_MS = 30_000;

type ListCommand = Extract<Command, { kind: 'list' }>;

export async function watchList(
  ctx: CliContext,
  cmd: ListCommand,
  read: () => Promise<ModelSummary[]>,
  first: ModelSummary[],
): Promise<number> {
  const { only, timeoutMs } = cmd.watch!;
  const emit = emitter(ctx, cmd, first);
  let known = new Map(first.map((m) => [m.workflowId, m]));
  if (!only) {
    if (first.length === 0 && cmd.output === 'text') ctx.io.stdout.write(`${emptyList(cmd.namespace)}\n`);
    for (const model of first) emit(model);
  }
  await poll(
    async () => {
      const models = await read();
      return { models, gone: await leftSince(ctx, known, models) };
    },
    ({ models, gone }) => {
      const next = new Map<string, ModelSummary>();
      for (const model of models) {
        const before = known.get(model.workflowId);
        // A status query that did not answer this time (`?`) is not a change: the last answer stands.
        const kept = before && !model.status && model.execution === 'RUNNING' ? before : model;
        next.set(model.workflowId, kept);
        if (!before || rowKey(kept) !== rowKey(before)) emit(kept);
      }
      for (const model of gone) emit(model);
      known = next;
    },
    {
      intervalMs: INTERVAL_MS,
      maxIntervalMs: MAX_INTERVAL_MS,
      deadline: Date.now() + (timeoutMs ?? Infinity),
      signal: ctx.io.signal,
      onRetry: (err, retryInMs) =>
        ctx.io.stderr.write(
          `warning: cannot list the models right now (${err.message}); still watching, next read in ${retryInMs / 1_000}s\n`,
        ),
    },
  );
  return EXIT.ok;
}

/** What changes a row: its PHASE (with how the workflow ended), READY and GEN. */
function rowKey(model: ModelSummary): string {
  const s = model.status;
  return [model.execution, model.phase, s?.readyReplicas, s?.replicas, s?.observedGeneration, s?.generation].join();
}

/**
 * The models of `known` missing from `models`, each as its workflow is now: closed (deleted, terminated), or running
 * but no longer matching (another phase than --phase asks for, labels that -l does not select).
 */
async function leftSince(
  ctx: CliContext,
  known: Map<string, ModelSummary>,
  models: ModelSummary[],
): Promise<ModelSummary[]> {
  const present = new Set(models.map((m) => m.workflowId));
  const left = [...known.values()].filter((m) => !present.has(m.workflowId));
  return Promise.all(
    left.map(async (model) => {
      try {
        return summaryOf(await describeModel(ctx.client, model)) ?? { ...model, status: undefined };
      } catch (err) {
        // Gone from Temporal altogether (its history removed): the last row known, marked so.
        if (err instanceof ModelNotFoundError || err instanceof WorkflowNotFoundError) {
          return { ...model, execution: 'NOT_FOUND', status: undefined };
        }
        throw err;
      }
    }),
  );
}

/**
 * How one model is printed: text, a row of the table (the header once, before the first row; every row padded to
 * the widths of the first listing, as far as its cells fit); -o json one model a line; -o yaml a document each;
 * -o name its name.
 */
function emitter(ctx: CliContext, cmd: ListCommand, first: ModelSummary[]): (model: ModelSummary) => void {
  const out = ctx.io.stdout;
  switch (cmd.output) {
    case 'json':
      return (model) => out.write(`${JSON.stringify(model)}\n`);
    case 'yaml':
      return (model) => out.write(`---\n${stringify(model, { lineWidth: 0 })}`);
    case 'name':
      return (model) => printName(ctx, model);
    case 'text': {
      const columns: ListColumns = { everyNamespace: cmd.namespace === undefined, wide: cmd.wide === true };
      const header = listHeader(columns);
      const widths = columnWidths([header, ...first.map((m) => listRow(m, ctx.io.now(), columns))]);
      // PHASE as wide as the longest phase: the column a watch's rows change most stays aligned.
      const phase = header.indexOf('PHASE');
      widths[phase] = Math.max(widths[phase]!, ...PHASES.map((p) => p.length));
      let headed = false;
      return (model) => {
        if (!headed) out.write(`${alignedRow(header, widths)}\n`);
        headed = true;
        out.write(`${alignedRow(listRow(model, ctx.io.now(), columns), widths)}\n`);
      };
    }
  }
}
