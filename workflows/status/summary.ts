// The Web UI's "current details" of a model: a short markdown summary of its status.
import { formatBytes, formatDuration, type ModelStatus, type TimelineEntry } from '../contract/index.js';

/** Timeline entries shown in the summary (the status query has them all). */
const SUMMARY_ENTRIES = 12;

// Markdown table cells must not break the table.
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

function row(entry: TimelineEntry): string {
  const took = entry.durationMs !== undefined ? formatDuration(entry.durationMs) : 'running';
  return `| ${entry.step} | ${entry.generation} | ${entry.outcome ?? '…'} | ${took} | ${cell(entry.detail ?? '')} |`;
}

/** Phase, endpoint, last error, waiting state, download progress and the latest timeline entries. */
export function summarizeStatus(status: ModelStatus): string {
  const lines = [
    `**${status.namespace}/${status.name}** on \`${status.cluster}\`: **${status.phase}**`,
    '',
    `- generation ${status.generation} (cluster at ${status.observedGeneration}), ${status.readyReplicas}/${status.replicas} ready, source \`${status.source}\``,
  ];
  if (status.endpoint) lines.push(`- endpoint: ${status.endpoint} (model \`${status.servedModelName}\`)`);
  if (status.lastError) {
    const where = status.lastError.step ? ` at ${status.lastError.step}` : '';
    lines.push(`- last error${where}: **${status.lastError.reason}**: ${cell(status.lastError.message)}`);
  }
  if (status.waiting)
    lines.push(
      `- waiting: **${status.waiting.reason}** ${cell(status.waiting.message)} (since ${status.waiting.since})`,
    );
  if (status.download && status.phase === 'Downloading') {
    const { bytes, totalBytes, state } = status.download;
    const of = totalBytes ? ` of ${formatBytes(totalBytes)} (${Math.floor((100 * bytes) / totalBytes)}%)` : '';
    lines.push(`- download: ${formatBytes(bytes)}${of}, ${state}`);
  }
  const entries = status.timeline.slice(-SUMMARY_ENTRIES);
  if (entries.length > 0) {
    lines.push('', '| step | gen | outcome | took | detail |', '|---|---|---|---|---|', ...entries.map(row));
  }
  return lines.join('\n');
}
