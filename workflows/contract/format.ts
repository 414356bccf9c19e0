// Durations, sizes and the load baseline as people read them, the same in status, the Web UI, the CLI and activity
// messages. Pure.
import type { Baseline, DownloadProgress, MovedTo } from './status.js';

/** `950ms`, `12.3s`, `4m 05s`, `1h 02m`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes}m ${String(Math.floor((ms % 60_000) / 1_000)).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h ${String(minutes % 60).padStart(2, '0')}m`;
}

/** `512 B`, `1.5 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

/** `1.2 GiB of 3.4 GiB (35%), 45.0 MiB/s, 52.0s left`; the parts the download knows. */
export function formatDownload(
  download: Pick<DownloadProgress, 'bytes' | 'totalBytes' | 'bytesPerSecond' | 'etaSeconds'>,
): string {
  const { bytes, totalBytes, bytesPerSecond, etaSeconds } = download;
  const parts = [
    totalBytes
      ? `${formatBytes(bytes)} of ${formatBytes(totalBytes)} (${Math.floor((100 * bytes) / totalBytes)}%)`
      : formatBytes(bytes),
  ];
  if (bytesPerSecond !== undefined) parts.push(bytesPerSecond === 0 ? 'stalled' : `${formatBytes(bytesPerSecond)}/s`);
  if (etaSeconds !== undefined) parts.push(`${formatDuration(etaSeconds * 1000)} left`);
  return parts.join(', ');
}

/**
 * One line for a person: `8 requests at once per replica meet ttft ≤ 2s and itl ≤ 100ms for 95% (p95 ttft 412 ms,
 * itl 21 ms; measured at generation 3)`.
 */
export function describeBaseline(baseline: Baseline): string {
  const { goal, maxConcurrency, capped, ttftP95Ms, itlP95Ms, generation } = baseline;
  const within = `ttft ≤ ${goal.ttft} and itl ≤ ${goal.itl} for ${Math.round(goal.attainment * 100)}%`;
  const at = `measured at generation ${generation}`;
  if (maxConcurrency === 0) return `no concurrency meets ${within}, not even 1 request at a time (${at})`;
  const count = capped ? `at least ${maxConcurrency} (the measurement's ceiling)` : String(maxConcurrency);
  const plural = maxConcurrency === 1 && !capped ? 'request' : 'requests';
  return `${count} ${plural} at once per replica meet ${within} (p95 ttft ${ttftP95Ms} ms, itl ${itlP95Ms} ms; ${at})`;
}

/** Where a moved model serves now: `cluster east at http://… (move/ns/name)`. */
export function describeMovedTo(to: MovedTo): string {
  return `cluster ${to.cluster}${to.endpoint ? ` at ${to.endpoint}` : ''} (${to.move})`;
}
