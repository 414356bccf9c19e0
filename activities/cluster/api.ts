// The thin effect layer between Ferry's pure builders and the Kubernetes API: apply, read, list, delete, watch.
import {
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  Watch,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { isNotFound, kubeFailure } from './errors.js';

/** What names one object: enough to read or delete it. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

export const describeRef = (r: ObjectRef): string => `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;

export const refOf = (obj: KubernetesObject): ObjectRef => ({
  apiVersion: obj.apiVersion!,
  kind: obj.kind!,
  name: obj.metadata!.name!,
  namespace: obj.metadata?.namespace,
});

/** A watch event, as the API server sends it. */
export type WatchEvent<T> = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: T };

/** Kubernetes as the activities use it; every failure is already an `ApplicationFailure` saying what was being done. */
export class Cluster {
  readonly objects: KubernetesObjectApi;

  constructor(readonly kc: KubeConfig) {
    this.objects = KubernetesObjectApi.makeApiClient(kc);
  }

  /** Server-side apply under `fieldManager`; `force` takes over fields other managers own (use only after a claim check). */
  async apply<T extends KubernetesObject>(
    obj: T,
    fieldManager: string,
    opts: { force?: boolean; dryRun?: boolean } = {},
  ): Promise<T> {
    try {
      return await this.objects.patch(
        obj,
        undefined,
        opts.dryRun ? 'All' : undefined,
        fieldManager,
        opts.force ?? true,
        PatchStrategy.ServerSideApply,
      );
    } catch (err) {
      throw kubeFailure(err, `applying ${describeRef(refOf(obj))}`);
    }
  }

  /** The object, or undefined when it does not exist. */
  async get<T extends KubernetesObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return await this.objects.read<T>({
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: { name: ref.name, namespace: ref.namespace },
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw kubeFailure(err, `reading ${describeRef(ref)}`);
    }
  }

  async list<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace: string,
    selectors: { labelSelector?: string; fieldSelector?: string } = {},
  ): Promise<T[]> {
    try {
      const res = await this.objects.list<T>(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        selectors.fieldSelector,
        selectors.labelSelector,
      );
      return res.items;
    } catch (err) {
      throw kubeFailure(err, `listing ${kind} in ${namespace}`);
    }
  }

  /**
   * Deletes the object; true when it was there, false when it was already gone (404 is success). `preconditions.uid`
   * deletes only that very object (409 if the name now belongs to another one), so a check-then-delete cannot race.
   */
  async delete(
    ref: ObjectRef,
    propagationPolicy: 'Background' | 'Foreground' | 'Orphan' = 'Background',
    preconditions?: { uid?: string; resourceVersion?: string },
  ): Promise<boolean> {
    try {
      await this.objects.delete(
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } },
        undefined,
        undefined,
        undefined,
        undefined,
        propagationPolicy,
        preconditions ? { propagationPolicy, preconditions } : undefined,
      );
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw kubeFailure(err, `deleting ${describeRef(ref)}`);
    }
  }

  /**
   * A JSON merge patch (RFC 7386) of fields no apply manages, e.g. removing owner references; put
   * `metadata.resourceVersion` in the patch to make it conditional (409 when the object changed meanwhile).
   */
  async mergePatch<T extends KubernetesObject>(ref: ObjectRef, patch: Record<string, unknown>): Promise<T> {
    const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
    const body = {
      ...patch,
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      metadata: { ...metadata, name: ref.name, namespace: ref.namespace },
    };
    try {
      return (await this.objects.patch(
        body,
        undefined,
        undefined,
        undefined,
        undefined,
        PatchStrategy.MergePatch,
      )) as T;
    } catch (err) {
      throw kubeFailure(err, `patching ${describeRef(ref)}`);
    }
  }

  /**
   * The last lines a container printed (its previous run's with `previous`), or undefined when the kubelet cannot be
   * asked (no permission for pods/log, no node, simulated nodes): a log tail only ever adds to a message.
   */
  async podLogTail(
    namespace: string,
    pod: string,
    container: string,
    opts: { previous?: boolean; tailLines?: number; timeoutMs?: number } = {},
  ): Promise<string | undefined> {
    const core = this.kc.makeApiClient(CoreV1Api);
    const read = core.readNamespacedPodLog({
      name: pod,
      namespace,
      container,
      previous: opts.previous,
      tailLines: opts.tailLines ?? 20,
      limitBytes: 16_384,
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), opts.timeoutMs ?? 3_000);
    });
    try {
      const text = await Promise.race([read.catch(() => undefined), timeout]);
      return typeof text === 'string' && text.trim() ? text : undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Watches a collection from `path` (e.g. `/apis/batch/v1/namespaces/ns/jobs`) and calls `onEvent` until it returns
   * true, the signal aborts, or `timeoutMs` passes; re-establishes the watch when the server closes it.
   * Returns whether `onEvent` said done.
   */
  async watchUntil<T>(
    path: string,
    query: Record<string, string | undefined>,
    onEvent: (ev: WatchEvent<T>) => boolean | Promise<boolean>,
    opts: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<boolean> {
    const end = Date.now() + opts.timeoutMs;
    const watch = new Watch(this.kc);
    while (Date.now() < end && !opts.signal?.aborted) {
      const done = await new Promise<boolean>((resolve, reject) => {
        let settled = false;
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
            // The server ends watches on its own schedule; a closed watch is simply re-established.
            () => finish(false),
          )
          .then((c) => {
            controller = c;
            if (settled) c.abort();
          })
          .catch((err: unknown) => finish(false, kubeFailure(err, `watching ${path}`)));
      });
      if (done) return true;
    }
    return false;
  }
}
