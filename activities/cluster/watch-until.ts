// A watch over one collection held until its handler is satisfied: re-established when the server closes it or the
// stream is cut, ended by a signal or a deadline. Activities reach it through Cluster.watchUntil (api.ts).
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { kubeFailure } from './errors.js';

/** A watch event, as the API server sends it. */
export type WatchEvent<T> = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: T };

/**
 * Watches a collection from `path` (e.g. `/apis/batch/v1/namespaces/ns/jobs`) and calls `onEvent` until it returns
 * true, the signal aborts, or `timeoutMs` passes; re-establishes the watch at once when the server closes it or the
 * stream is cut. Returns whether `onEvent` said done; throws when a watch cannot be established (403: `Forbidden`).
 */
export async function watchCollectionUntil<T>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined>,
  onEvent: (ev: WatchEvent<T>) => boolean | Promise<boolean>,
  opts: { signal?: AbortSignal; timeoutMs: number },
): Promise<boolean> {
  const end = Date.now() + opts.timeoutMs;
  const watch = new Watch(kc);
  while (Date.now() < end && !opts.signal?.aborted) {
    const done = await new Promise<boolean>((resolve, reject) => {
      let settled = false;
      let established = false;
      let controller: AbortController | undefined;
      const finish = (v: boolean, err?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        controller?.abort();
        if (err) reject(err instanceof Error ? err : new Error(`watching ${path} failed`, { cause: err }));
        else resolve(v);
      };
      const onAbort = () => finish(false);
      const timer = setTimeout(() => finish(false), Math.max(0, Math.min(end - Date.now(), 60_000)));
      opts.signal?.addEventListener('abort', onAbort);
      watch
        .watch(
          path,
          { ...query, allowWatchBookmarks: true, timeoutSeconds: 60 },
          (type, object) => {
            if (settled) return;
            Promise.resolve(onEvent({ type: type as WatchEvent<T>['type'], object: object as T }))
              .then((isDone) => isDone && finish(true))
              .catch((err: unknown) => finish(false, err));
          },
          // The server ends watches on its own schedule; a closed (or cut) watch is simply re-established. One that
          // could not be established is the caller's to retry (wait.ts: on its next tick), not a tight loop here.
          (err: unknown) => finish(false, established || !err ? undefined : watchFailure(err, path)),
        )
        .then((c) => {
          established = true;
          controller = c;
          if (settled) c.abort();
        })
        .catch((err: unknown) => finish(false, kubeFailure(err, `watching ${path}`)));
    });
    if (done) return true;
  }
  return false;
}

/** Why a watch could not be established: a 403 fails the wait that asked; anything else it rides out by polling. */
function watchFailure(err: unknown, path: string): Error {
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown };
  const status = typeof e.statusCode === 'number' ? e.statusCode : e.code;
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (status === 403) return kubeFailure({ code: 403, message }, `watching ${path}`);
  return new Error(`watching ${path} failed: ${message}`, { cause: err });
}
