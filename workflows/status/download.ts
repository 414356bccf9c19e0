// The download as status shows it, from the puller's reports. Pure (workflow code).
import type { DownloadProgress, StepProgress } from '../contract/index.js';

/**
 * The download after a report: its bytes and total (a report may leave either out: the ones before stay), the rate the
 * puller measured over its last interval and the time left at that rate. A report without a rate (the puller's first
 * line, a pod between attempts) shows none rather than an old one.
 */
export function downloadProgress(
  previous: DownloadProgress | undefined,
  progress: StepProgress,
  now: string,
): DownloadProgress {
  const bytes = progress.bytes ?? previous?.bytes ?? 0;
  const totalBytes = progress.totalBytes ?? previous?.totalBytes;
  const rate = progress.bytesPerSecond;
  return {
    bytes,
    ...(totalBytes !== undefined ? { totalBytes } : {}),
    ...(rate !== undefined ? { bytesPerSecond: rate } : {}),
    ...(rate && totalBytes !== undefined && totalBytes > bytes
      ? { etaSeconds: Math.ceil((totalBytes - bytes) / rate) }
      : {}),
    state: progress.state,
    ...(progress.message ? { message: progress.message } : {}),
    updatedAt: now,
  };
}
