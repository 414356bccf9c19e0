// What the adapter Job's pod says about each adapter: its container's state. A container that exited 0 put the
// adapter's files on the volume (or found them there); one that failed says why in its last log lines, which
// Kubernetes keeps as the container's termination message (`FallbackToLogsOnError`). Pure.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { AdapterSpec } from '../../workflows/contract/index.js';
import { adapterContainerName, summarizePullerLog } from '../builders/index.js';

export interface AdapterFetch {
  name: string;
  /** Fetched: its files are complete on the volume. Failed: for good, in this Job. Running: not finished yet. */
  state: 'Fetched' | 'Failed' | 'Running';
  /** For Failed, the puller's reason (SourceNotFound, AccessDenied, NoSpace, DownloadFailed, …); for Running, the wait. */
  reason?: string;
  message?: string;
}

/** Each adapter's outcome in `pod` (the Job's pod; undefined before it exists: all Running). */
export function adapterFetches(pod: V1Pod | undefined, adapters: readonly AdapterSpec[]): AdapterFetch[] {
  const statuses = new Map((pod?.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  return adapters.map((adapter, index) => fetchOf(adapter.name, statuses.get(adapterContainerName(index)), pod));
}

function fetchOf(name: string, status: V1ContainerStatus | undefined, pod: V1Pod | undefined): AdapterFetch {
  const terminated = status?.state?.terminated;
  if (terminated) {
    if (terminated.exitCode === 0) return { name, state: 'Fetched' };
    const error = summarizePullerLog(terminated.message ?? '').error;
    return {
      name,
      state: 'Failed',
      reason: error?.reason ?? 'DownloadFailed',
      message:
        error?.message ||
        `its container exited with code ${terminated.exitCode}${terminated.reason ? ` (${terminated.reason})` : ''}`,
    };
  }
  if (pod?.status?.phase === 'Failed') {
    // The pod ended (its deadline, an eviction) before this container did.
    return {
      name,
      state: 'Failed',
      reason: pod.status.reason ?? 'DownloadFailed',
      message: pod.status.message ?? 'the pod ended before the adapter was fetched',
    };
  }
  const waiting = status?.state?.waiting;
  return {
    name,
    state: 'Running',
    ...(waiting?.reason ? { reason: waiting.reason } : {}),
    ...(waiting?.message ? { message: waiting.message } : {}),
  };
}
