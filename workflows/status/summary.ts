// The Web UI's "current details" of a model: a short markdown summary of its status. Lists, not tables: the UI's
// markdown frame pads no table cell, so a table row reads `download1Succeeded4.4s`; a list item reads the same there
// as in `temporal workflow metadata`.
import {
  describeBaseline,
  describeMovedTo,
  formatDownload,
  formatDuration,
  type ModelStatus,
  type TimelineEntry,
} from '../contract/index.js';

/** Timeline entries shown in the summary (the status query has them all). */
const SUMMARY_ENTRIES = 12;

// Text from outside Ferry (messages, details) stays text: one line, no emphasis, code, links or raw HTML.
const text = (value: string): string => value.replace(/\s*\n\s*/g, ' ').replace(/[\\`*_[\]<>&~]/g, '\\$&');

/** `Succeeded in 4.4s`, `Failed after 2m 05s`, `running since 2026-01-01T12:00:10.000Z`. */
function outcomeOf({ outcome, durationMs, startedAt }: TimelineEntry): string {
  if (!outcome) return `running since ${startedAt}`;
  if (durationMs === undefined) return outcome;
  return `${outcome} ${outcome === 'Succeeded' ? 'in' : 'after'} ${formatDuration(durationMs)}`;
}

/** `- download (gen 1): Succeeded in 4.4s — chat-pull-1a2b3c4d in 4s`. */
function item(entry: TimelineEntry): string {
  const detail = entry.detail ? ` — ${text(entry.detail)}` : '';
  return `- ${entry.step} (gen ${entry.generation}): ${outcomeOf(entry)}${detail}`;
}

/**
 * Phase, endpoint, last error, waiting state, download progress, LoRA adapters, the load baseline and the latest
 * timeline entries.
 */
export function summarizeStatus(status: ModelStatus): string {
  const lines = [
    `**${status.namespace}/${status.name}** on \`${status.cluster}\`: **${status.phase}**`,
    '',
    `- generation ${status.generation} (cluster at ${status.observedGeneration}), ${status.readyReplicas} of ${status.replicas} replicas ready, source \`${status.source}\``,
  ];
  if (status.endpoint) lines.push(`- endpoint: ${status.endpoint} (model \`${status.servedModelName}\`)`);
  if (status.movedTo) lines.push(`- moved to ${describeMovedTo(status.movedTo)}`);
  if (status.lastError) {
    const where = status.lastError.step ? ` at ${status.lastError.step}` : '';
    lines.push(`- last error${where}: **${status.lastError.reason}**: ${text(status.lastError.message)}`);
  }
  if (status.waiting)
    lines.push(
      `- waiting: **${status.waiting.reason}** ${text(status.waiting.message)} (since ${status.waiting.since})`,
    );
  if (status.download && status.phase === 'Downloading') {
    lines.push(`- download: ${formatDownload(status.download)}, ${text(status.download.state)}`);
  }
  for (const a of status.adapters ?? []) {
    const why = a.message ? `: ${text(a.message)}` : '';
    lines.push(
      `- adapter \`${a.name}\`: **${a.state}** on ${a.loadedReplicas} of ${a.readyReplicas} ready replicas${why}`,
    );
  }
  if (status.baseline) lines.push(`- load baseline: ${text(describeBaseline(status.baseline))}`);
  const entries = status.timeline.slice(-SUMMARY_ENTRIES);
  if (entries.length > 0) {
    const latest =
      entries.length < status.timeline.length ? ` (the latest ${entries.length} of ${status.timeline.length})` : '';
    // A paragraph between the two lists, or markdown joins them into one.
    lines.push('', `**Timeline**${latest}`, '', ...entries.map(item));
  }
  return lines.join('\n');
}
