// What `ferry` prints for people: status summaries, tables and progress. Pure functions of the data and `now`.
import {
  describeBaseline,
  describeMovedTo,
  formatDownload,
  formatDuration,
  type ModelStatus,
  type TimelineEntry,
  usageAt,
  workflowIdFor,
} from '../../workflows/contract/index.js';
import { describeRef, InvalidSpecError, ModelFailedError, NoCapacityError } from '../errors.js';
import type { ModelSummary } from '../list-models.js';
import { DocumentErrors } from './read-document.js';

/** Columns separated by two spaces, each as wide as its widest cell; the last column is not padded. */
export function table(rows: string[][], indent = ''): string {
  const widths = columnWidths(rows);
  return rows.map((row) => `${indent}${alignedRow(row, widths)}`.trimEnd()).join('\n');
}

/**
 * How long ago `from` was, as kubectl prints an AGE (`duration.HumanDuration` of k8s.io/apimachinery through
 * `translateTimestampSince`): `<unknown>` for a time that is not one.
 */
function age(from: string | Date, now: Date): string {
  const ms = now.getTime() - new Date(from).getTime();
  return Number.isNaN(ms) ? '<unknown>' : humanDuration(ms);
}

/**
 * A duration as kubectl prints one, two or three significant figures: `90s`, `5m30s`, `45m`, `3h20m`, `20h`,
 * `3d4h`, `200d`, `2y30d`, `9y`. Up to a second in the future is `0s` (clock skew); further is `<invalid>`.
 */
export function humanDuration(ms: number): string {
  // Go's int(d.Seconds()) and integer division truncate toward zero; every step below keeps that.
  const seconds = Math.trunc(ms / 1_000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.trunc(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}

/** `9m 30s` from `from` until `now`: a step's running time, in the units of the durations beside it. */
function elapsed(from: string, now: Date): string {
  return formatDuration(Math.max(0, now.getTime() - new Date(from).getTime()));
}

/** `r2 from r1, Canary step 1 of 3 at 50%: Progressing for 2m`, and why it was aborted. */
function describeRollout(r: NonNullable<ModelStatus['rollout']>, now: Date): string {
  const when = r.endedAt ? `${age(r.endedAt, now)} ago` : `for ${age(r.startedAt, now)}`;
  const why = r.message ? `: ${oneLine(r.message)}` : '';
  return `${r.revision} from ${r.from}, ${r.strategy} step ${r.step} of ${r.steps} at ${r.traffic}%: ${r.state} ${when}${why}`;
}

/** A progress bar `[#######-------------]` of `width` characters inside the brackets. */
export function progressBar(fraction: number, width = 24): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

/** The status as `ferry status` shows it; `wide` (-o wide) adds who asked for the generation, when the status last
 * changed, and the workflow ID. */
export function formatStatus(status: ModelStatus, now: Date, webUi?: string, { wide = false } = {}): string {
  const lines = [`${status.name}  (namespace ${status.namespace}, cluster ${status.cluster})`];
  const field = (name: string, value: string) => lines.push(`  ${`${name}:`.padEnd(12)} ${value}`);
  field('phase', status.phase);
  if (status.movedTo) field('moved to', `${describeMovedTo(status.movedTo)}, ${age(status.movedTo.at, now)} ago`);
  if (status.tenant !== undefined) field('tenant', status.tenant);
  if (status.endpoint) field('endpoint', `${status.endpoint}  (model ${status.servedModelName})`);
  else field('model', status.servedModelName);
  field('replicas', `${status.readyReplicas}/${status.replicas} ready`);
  field('generation', `${status.generation} (observed ${status.observedGeneration})`);
  field('source', status.sourceHash ? `${status.source}  (sha256 ${status.sourceHash.slice(0, 8)})` : status.source);
  if (status.revision) field('revision', status.revision);
  if (status.rollout) field('rollout', describeRollout(status.rollout, now));
  if (status.revisions && status.revisions.length > 1) {
    field('revisions', status.revisions.map((r) => `${r.name} ${r.role} ${r.weight}% (slot ${r.slot})`).join(', '));
  }
  if (status.download && status.phase === 'Downloading') {
    field('download', `${formatDownload(status.download)}, ${status.download.state}`);
  }
  if (status.waiting) {
    const message = status.waiting.message ? `: ${status.waiting.message}` : '';
    field('waiting', `${status.waiting.reason}${message} (for ${age(status.waiting.since, now)})`);
  }
  if (status.lastError) {
    const { reason, message, step, generation } = status.lastError;
    const where = [step ? `at ${step}` : '', generation !== undefined ? `generation ${generation}` : ''].filter(
      Boolean,
    );
    field('last error', `${reason}${where.length ? ` (${where.join(', ')})` : ''}: ${message}`);
  }
  field('age', age(status.startedAt, now));
  if (wide) {
    if (status.requestedBy !== undefined) field('asked by', status.requestedBy);
    field('updated', `${age(status.updatedAt, now)} ago`);
    field('workflow', workflowIdFor(status));
  }
  if (webUi) field('web UI', webUi);
  if (status.adapters?.length) {
    lines.push('  adapters:');
    lines.push(
      table(
        [
          ['NAME', 'STATE', 'REPLICAS', 'MESSAGE'],
          ...status.adapters.map((a) => [
            a.name,
            a.state,
            `${a.loadedReplicas}/${a.readyReplicas}`,
            oneLine(a.message ? `${a.reason ? `${a.reason}: ` : ''}${a.message}` : ''),
          ]),
        ],
        '    ',
      ),
    );
  }
  if (status.baseline) {
    const { probes, pod, measuredAt } = status.baseline;
    field('baseline', describeBaseline(status.baseline));
    field('probes', `${probes}${pod ? ` on ${pod}` : ''}, ${age(measuredAt, now)} ago`);
  }
  if (status.scaling) {
    const { replicas, minReplicas, maxReplicas, targetConcurrency, message, lastDecision } = status.scaling;
    const target = targetConcurrency !== undefined ? `, ${targetConcurrency} requests in flight each` : '';
    field('scaling', `${replicas} replicas (${minReplicas}–${maxReplicas}${target})${message ? `: ${message}` : ''}`);
    if (lastDecision) {
      const { from, to, reason, at } = lastDecision;
      field('last scale', `${from} → ${to}, ${age(at, now)} ago: ${oneLine(reason)}`);
    }
    const { schedule } = status.scaling;
    if (schedule) {
      const { nextChangeAt, nextMinReplicas } = schedule;
      const next =
        nextChangeAt !== undefined
          ? `; at least ${nextMinReplicas} from ${nextChangeAt} (in ${humanDuration(Math.max(0, Date.parse(nextChangeAt) - now.getTime()))})`
          : '; no change ahead';
      field('schedule', `at least ${schedule.minReplicas} now${next}`);
    }
  }
  if (status.expiresAt) {
    const left = new Date(status.expiresAt).getTime() - now.getTime();
    field(
      'expires',
      `${status.expiresAt} (${left > 0 ? `in ${humanDuration(left)}` : 'now'}: the model deletes itself)`,
    );
  }
  if (status.usage) {
    const gpuHours = usageAt(status.usage, now.toISOString()) / 3600;
    field('usage', `${gpuHours.toFixed(2)} GPU-hours by ready replicas (${status.usage.gpus} GPUs held now)`);
  }
  if (status.conditions.length > 0) {
    lines.push('  conditions:');
    lines.push(
      table(
        [
          ['TYPE', 'STATUS', 'REASON', 'GEN', 'MESSAGE'],
          ...status.conditions.map((c) => [
            c.type,
            c.status,
            c.reason,
            String(c.observedGeneration),
            oneLine(c.message),
          ]),
        ],
        '    ',
      ),
    );
  }
  if (status.timeline.length > 0) {
    lines.push('  timeline:');
    lines.push(
      table(
        [['STEP', 'GEN', 'OUTCOME', 'TOOK', 'STARTED', 'DETAIL'], ...status.timeline.map((e) => timelineRow(e, now))],
        '    ',
      ),
    );
  }
  return lines.join('\n');
}

function timelineRow(entry: TimelineEntry, now: Date): string[] {
  const took = entry.durationMs !== undefined ? formatDuration(entry.durationMs) : `${elapsed(entry.startedAt, now)}…`;
  return [
    entry.step,
    String(entry.generation),
    entry.outcome ?? 'running',
    took,
    `${age(entry.startedAt, now)} ago`,
    oneLine(entry.detail ?? ''),
  ];
}

/** Which columns `ferry list` prints: NAMESPACE first for every namespace (-A), MODEL, SOURCE and REASON last with
 * -o wide (as kubectl's wide columns, after AGE). */
export interface ListColumns {
  everyNamespace: boolean;
  wide: boolean;
}

/**
 * The table `ferry list` prints, as kubectl's: for one `namespace` no NAMESPACE column; for every namespace
 * (`namespace` undefined, -A) a NAMESPACE column first.
 */
export function formatList(models: ModelSummary[], now: Date, namespace?: string, { wide = false } = {}): string {
  if (models.length === 0) return emptyList(namespace);
  const columns = { everyNamespace: namespace === undefined, wide };
  return table([listHeader(columns), ...models.map((m) => listRow(m, now, columns))]);
}

/** What `ferry list` says when no model matches. */
export function emptyList(namespace?: string): string {
  return namespace ? `no models in namespace ${namespace}` : 'no models';
}

export function listHeader({ everyNamespace, wide }: ListColumns): string[] {
  return [
    ...(everyNamespace ? ['NAMESPACE'] : []),
    ...['NAME', 'CLUSTER', 'PHASE', 'READY', 'GEN', 'ENDPOINT', 'AGE'],
    ...(wide ? ['MODEL', 'SOURCE', 'REASON'] : []),
  ];
}

/** One model's row; a cell the status query would have filled is `?` when it did not answer, `-` for a closed run. */
export function listRow(m: ModelSummary, now: Date, { everyNamespace, wide }: ListColumns): string[] {
  const unknown = m.execution === 'RUNNING' ? '?' : '-';
  const status = m.status;
  return [
    ...(everyNamespace ? [m.namespace] : []),
    m.name,
    m.cluster,
    // A workflow that ended without deleting the model (terminated, failed) no longer manages it: say so.
    m.execution === 'RUNNING' || m.execution === 'COMPLETED' ? m.phase : `${m.phase} (${m.execution.toLowerCase()})`,
    status ? `${status.readyReplicas}/${status.replicas}` : unknown,
    status ? `${status.observedGeneration}/${status.generation}` : unknown,
    status?.endpoint ?? '',
    age(m.startedAt, now),
    // Why it is not serving as asked: what it waits for, else the error it retries or failed with.
    ...(wide ? [status?.servedModelName ?? unknown, status?.source ?? unknown, reasonOf(status)] : []),
  ];
}

function reasonOf(status: ModelStatus | undefined): string {
  return status?.waiting?.reason ?? status?.lastError?.reason ?? '';
}

/** `cells` padded to `widths` (a wider cell widens its column on this line only), as `table` lays out a row. */
export function alignedRow(cells: string[], widths: readonly number[]): string {
  return cells
    .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
    .join('  ')
    .trimEnd();
}

/** The width of each column of `rows`, as `table` lays them out. */
export function columnWidths(rows: string[][]): number[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return widths;
}

/**
 * One line about what changed between two statuses, or undefined when nothing a person follows changed:
 * `Downloading  generation 1`, `Downloading  1.2 GiB of 3.4 GiB (35%), Running`, `waiting: Unschedulable: …`.
 */
export function changeLine(
  previous: ModelStatus | undefined,
  status: ModelStatus,
  { download: showDownload = true, replicas = false }: { download?: boolean; replicas?: boolean } = {},
): string | undefined {
  const parts: string[] = [];
  const phaseChanged = previous?.phase !== status.phase || previous.generation !== status.generation;
  // `replicas` (status -w): ready replicas are part of the line, and a change of them is a line of its own.
  const replicasChanged =
    replicas &&
    previous !== undefined &&
    (previous.readyReplicas !== status.readyReplicas || previous.replicas !== status.replicas);
  if (phaseChanged || replicasChanged) {
    let line = `${status.phase.padEnd(12)} generation ${status.generation}`;
    if (replicas) line += `  ready ${status.readyReplicas}/${status.replicas}`;
    if ((status.phase === 'Ready' || status.phase === 'Idle') && status.endpoint) line += `  ${status.endpoint}`;
    if (status.phase === 'Failed' && status.lastError)
      line += `  ${status.lastError.reason}: ${oneLine(status.lastError.message)}`;
    parts.push(line);
  }
  const download = showDownload && status.phase === 'Downloading' ? status.download : undefined;
  if (
    download &&
    (phaseChanged || download.bytes !== previous?.download?.bytes || download.state !== previous.download?.state)
  ) {
    parts.push(`${status.phase.padEnd(12)} ${formatDownload(download)}, ${download.state}`);
  }
  const waiting = status.waiting;
  if (waiting && (waiting.reason !== previous?.waiting?.reason || waiting.message !== previous.waiting.message)) {
    parts.push(
      `${status.phase.padEnd(12)} waiting: ${waiting.reason}${waiting.message ? `: ${oneLine(waiting.message)}` : ''}`,
    );
  }
  const error = status.lastError;
  if (
    error &&
    status.phase !== 'Failed' &&
    (error.at !== previous?.lastError?.at || error.reason !== previous.lastError.reason)
  ) {
    parts.push(`${status.phase.padEnd(12)} error (retrying): ${error.reason}: ${oneLine(error.message)}`);
  }
  return parts.length > 0 ? parts.join('\n') : undefined;
}

/** The live line of a TTY while downloading: a bar when the total is known. */
export function downloadBar(status: ModelStatus): string | undefined {
  const download = status.phase === 'Downloading' ? status.download : undefined;
  if (!download) return undefined;
  const bar = download.totalBytes ? `${progressBar(download.bytes / download.totalBytes)} ` : '';
  return `  ${bar}${formatDownload(download)}  ${download.state}`;
}

/** `error: …` lines for stderr: a failed model as `error: <Reason>: <message>`, spec problems one per line. */
export function errorLines(err: unknown, source?: string): string {
  if (err instanceof ModelFailedError) return `error: ${err.reason}: ${oneLine(err.message)}`;
  if (err instanceof NoCapacityError) return `error: NoCapacity: ${oneLine(err.message)}`;
  if (err instanceof InvalidSpecError) {
    const n = err.issues.length;
    const what = err.rejectedBy === 'workflow' ? 'the model rejected the update' : 'invalid ServedModel';
    const where = source && err.rejectedBy === 'client' ? ` in ${source}` : '';
    return [
      `error: ${what}${where} (${n} problem${n === 1 ? '' : 's'}):`,
      ...err.issues.map((issue) => `  ${issue.path}: ${oneLine(issue.message)}`),
    ].join('\n');
  }
  const message = err instanceof Error ? err.message : String(err);
  // The SDK's "Workflow Update failed" says nothing by itself: what failed it is in the cause.
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : undefined;
  return `error: ${message}${cause && !message.includes(cause) ? `: ${oneLine(cause)}` : ''}`;
}

/** Bad input on stderr: for the documents of -f, one block per problem, each naming its file and document. */
export function inputErrorLines(err: unknown): string {
  if (!(err instanceof DocumentErrors)) return errorLines(err);
  return err.problems.map((p) => errorLines(p.error, p.source)).join('\n');
}

/** What `serve` says when it is done. */
export function serveLine(result: {
  ref: Parameters<typeof describeRef>[0];
  started: boolean;
  workflowId: string;
}): string {
  return result.started
    ? `serving ${describeRef(result.ref)}: started workflow ${result.workflowId}`
    : `${describeRef(result.ref)} is already served with this spec: workflow ${result.workflowId}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
