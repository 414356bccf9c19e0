// The LoRA adapters' part of a status: each adapter's state from what the adapter Job and the replicas said, and the
// problem that keeps the model from Ready while one is not on every ready replica. Pure.
import type { AdapterFilesResult, AdapterStatus, AdapterSyncResult, ModelStatus } from '../contract/index.js';

/**
 * Each listed adapter's state, in the spec's order. One whose files the Job could not fetch is not loaded anywhere
 * (nothing asked the engines to): Failed or Missing with the puller's reason. The others, as the replicas hold them.
 */
export function adapterStatuses(
  names: string[],
  files: AdapterFilesResult | undefined,
  sync: AdapterSyncResult,
): AdapterStatus[] {
  const fileFailures = new Map((files?.failed ?? []).map((f) => [f.name, f]));
  const loaded = new Map(sync.adapters.map((a) => [a.name, a]));
  const readyReplicas = sync.incarnations.length;
  return names.map((name): AdapterStatus => {
    const file = fileFailures.get(name);
    const adapter = loaded.get(name);
    if (file || !adapter) {
      return {
        name,
        state: file?.permanent ? 'Failed' : 'Missing',
        loadedReplicas: 0,
        readyReplicas,
        ...(file ? { reason: file.reason, message: file.message } : {}),
      };
    }
    const counts = { loadedReplicas: adapter.loadedReplicas, readyReplicas: adapter.readyReplicas };
    if (adapter.readyReplicas > 0 && adapter.loadedReplicas === adapter.readyReplicas) {
      return { name, state: 'Loaded', ...counts };
    }
    const error = adapter.error;
    return {
      name,
      state: error?.permanent ? 'Failed' : 'Missing',
      ...counts,
      ...(error ? { reason: error.reason, message: error.message } : {}),
    };
  });
}

/**
 * Why the model is not Ready because of its adapters: `AdapterFailed` when one was refused for good (the spec must
 * change), `AdapterMissing` while one is only not loaded yet; undefined when each is on every ready replica.
 */
export function adapterProblem(adapters: AdapterStatus[] | undefined): { reason: string; message: string } | undefined {
  const short = (adapters ?? []).filter((a) => a.state !== 'Loaded');
  if (short.length === 0) return undefined;
  const failed = short.some((a) => a.state === 'Failed');
  const message = short
    .map(
      (a) =>
        `adapter ${a.name} ${a.state === 'Failed' ? 'failed' : 'is missing'} (loaded on ${a.loadedReplicas} of ${a.readyReplicas} ready replicas)` +
        (a.message ? `: ${a.message}` : ''),
    )
    .join('; ');
  return { reason: failed ? 'AdapterFailed' : 'AdapterMissing', message };
}

/**
 * The adapters as a look finds them when engine pods are new since the adapters were loaded (a replacement pod, a
 * new replica, a restarted engine): those engines hold none until they are loaded there again.
 */
export function adaptersForgotten(status: ModelStatus, newPods: string[], readyReplicas: number): ModelStatus {
  if (!status.adapters) return status;
  const message = `not loaded yet on the new engine ${newPods.length === 1 ? 'pod' : 'pods'} ${newPods.join(', ')}`;
  const loadedReplicas = Math.max(0, readyReplicas - newPods.length);
  return {
    ...status,
    adapters: status.adapters.map((a) =>
      a.state === 'Failed'
        ? a
        : { name: a.name, state: 'Missing', loadedReplicas, readyReplicas, reason: 'AdapterMissing', message },
    ),
  };
}
