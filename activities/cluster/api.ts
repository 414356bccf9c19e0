// The thin effect layer between Ferry's pure builders and the Kubernetes API: apply, read, list, delete, watch.
import {
  CoreV1Api,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
  type KubernetesObjectApi,
} from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { authenticatedFetch } from './authenticated-fetch.js';
import { isNotFound, kubeFailure } from './errors.js';
import { holdsMergePatch } from './merge-patch.js';
import {
  DEFAULT_RETRY_POLICY,
  isTransient,
  outcomeUnknown,
  statusOf,
  withRetries,
  type RetryNote,
  type RetryPolicy,
} from './request-retry.js';
import { boundedObjectApi, withRequestTimeout } from './request-timeout.js';
import { watchCollectionUntil, type WatchEvent } from './watch-until.js';

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

export interface ClusterOptions {
  /**
   * How long the first attempt of a request (not a watch) may take before it fails as a retryable timeout; each retry
   * of it may take twice as long as the one before, up to `maxRequestTimeoutMs`. Default 2 s, up to 15 s: the API
   * server answers a request for one object, or a model's few, in milliseconds, so an answer still missing after 2 s
   * is more likely lost (a dropped connection, a stuck server) than slow, and a slow one has its retries.
   */
  requestTimeoutMs?: number;
  maxRequestTimeoutMs?: number;
  /**
   * A read (GET) or a delete still unanswered after this long is sent once more and the first answer wins, so a
   * request lost on the way costs this, not the request's time bound. Default 500 ms; Infinity sends each once.
   */
  hedgeReadsAfterMs?: number;
  /** How each call is retried (request-retry.ts); tests shrink the budget. */
  retry?: Partial<RetryPolicy>;
  /** Hears of every retry, e.g. to show it as the step's waiting reason (`retryProgress`). */
  onRetry?: (note: RetryNote) => void;
}

const REQUEST_TIMEOUT_MS = 2_000;
const MAX_REQUEST_TIMEOUT_MS = 15_000;
const HEDGE_READS_AFTER_MS = 500;

/**
 * Kubernetes as the activities use it; every failure is already an `ApplicationFailure` saying what was being done.
 * Transient failures are retried per request first (request-retry.ts): reads, server-side applies and deletes are
 * repeated; a create or merge patch whose outcome is unknown is re-read before it is repeated.
 */
export class Cluster {
  readonly objects: KubernetesObjectApi;
  private readonly policy: RetryPolicy;
  private readonly onRetry: ((note: RetryNote) => void) | undefined;
  private readonly timeouts: { firstMs: number; maxMs: number };
  private http: typeof fetch | undefined;

  constructor(
    readonly kc: KubeConfig,
    options: ClusterOptions = {},
  ) {
    const maxMs = options.maxRequestTimeoutMs ?? MAX_REQUEST_TIMEOUT_MS;
    this.timeouts = { firstMs: Math.min(options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS, maxMs), maxMs };
    this.objects = boundedObjectApi(kc, maxMs, options.hedgeReadsAfterMs ?? HEDGE_READS_AFTER_MS);
    this.policy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.onRetry = options.onRetry;
  }

  /** `attempt` with per-request retries; stops retrying when the current activity is cancelled. */
  private retrying<T>(
    doing: string,
    attempt: () => Promise<T>,
    retryable: (err: unknown) => boolean = isTransient,
  ): Promise<T> {
    const { firstMs, maxMs } = this.timeouts;
    const bounded = (n: number) => withRequestTimeout(Math.min(firstMs * 2 ** (n - 1), maxMs), attempt);
    return withRetries(doing, bounded, {
      policy: this.policy,
      retryable,
      ...(this.onRetry ? { onRetry: this.onRetry } : {}),
      ...cancellation(),
    });
  }

  /** The object as the server has it now, or undefined when it does not exist; other failures are thrown as they are. */
  private async reread<T extends KubernetesObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return await this.objects.read<T>(headerOf(ref));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Whether the API server serves `kind` at `apiVersion` (a custom resource whose CRD may not be installed). Reads
   * the group's discovery document; client-node caches what it finds.
   */
  async serves(apiVersion: string, kind: string): Promise<boolean> {
    const doing = `looking up ${kind} (${apiVersion})`;
    try {
      return await this.retrying(doing, async () => {
        try {
          // The discovery lookup every request of the object API makes first (protected in client-node).
          const discovery = this.objects as unknown as { resource(a: string, k: string): Promise<unknown> };
          return (await discovery.resource(apiVersion, kind)) !== undefined;
        } catch (err) {
          if (isNotFound(err)) return false;
          throw err;
        }
      });
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /** Server-side apply under `fieldManager`; `force` takes over fields other managers own (use only after a claim check). */
  async apply<T extends KubernetesObject>(
    obj: T,
    fieldManager: string,
    opts: { force?: boolean; dryRun?: boolean } = {},
  ): Promise<T> {
    const doing = `applying ${describeRef(refOf(obj))}`;
    const force = opts.force ?? true;
    try {
      return await this.retrying(
        doing,
        () =>
          this.objects.patch(
            obj,
            undefined,
            opts.dryRun ? 'All' : undefined,
            fieldManager,
            force,
            PatchStrategy.ServerSideApply,
          ),
        // Applying is idempotent. A forced apply conflicts with no field manager and names no resourceVersion, so a
        // 409 there is the server running out of its own update retries: repeating it is right.
        (err) => isTransient(err) || (force && statusOf(err) === 409),
      );
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /**
   * The labels of a core object (`plural`: `secrets`, `persistentvolumeclaims`), undefined when it does not exist. Read
   * as PartialObjectMetadata: the API server sends the metadata only, so a Secret's data never reaches the worker
   * (RBAC still asks `get` on the kind).
   */
  async labelsOf(ref: ObjectRef & { plural: string }): Promise<Record<string, string> | undefined> {
    const doing = `reading the labels of ${describeRef(ref)}`;
    const server = this.kc.getCurrentCluster()?.server?.replace(/\/+$/, '');
    const path = `/api/v1/namespaces/${encodeURIComponent(ref.namespace ?? '')}/${ref.plural}/${encodeURIComponent(ref.name)}`;
    this.http ??= authenticatedFetch(this.kc);
    const http = this.http;
    try {
      return await this.retrying(doing, async () => {
        const res = await http(`${server}${path}`, {
          headers: { accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1' },
          signal: AbortSignal.timeout(this.timeouts.maxMs),
        });
        const body = await res.text();
        if (res.status === 404) return undefined;
        if (!res.ok) throw Object.assign(new Error(`HTTP ${res.status}`), { code: res.status, body });
        return (JSON.parse(body) as { metadata?: { labels?: Record<string, string> } }).metadata?.labels ?? {};
      });
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /** The object, or undefined when it does not exist. */
  async get<T extends KubernetesObject>(ref: ObjectRef): Promise<T | undefined> {
    const doing = `reading ${describeRef(ref)}`;
    try {
      return await this.retrying(doing, () => this.reread<T>(ref));
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  async list<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace: string,
    selectors: { labelSelector?: string; fieldSelector?: string } = {},
  ): Promise<T[]> {
    const doing = `listing ${kind} in ${namespace}`;
    try {
      const res = await this.retrying(doing, () =>
        this.objects.list<T>(
          apiVersion,
          kind,
          namespace,
          undefined,
          undefined,
          undefined,
          selectors.fieldSelector,
          selectors.labelSelector,
        ),
      );
      return res.items;
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /**
   * Deletes the object; true when it was there, false when it was already gone (404 is success). `preconditions.uid`
   * deletes only that very object (409 if the name now belongs to another one), so a check-then-delete cannot race.
   * Deleting is idempotent and repeated on transient failures; after a 409 the object is re-read: only a conflict
   * with the preconditions fails, and only when no earlier attempt of this call may have deleted the object.
   */
  async delete(
    ref: ObjectRef,
    propagationPolicy: 'Background' | 'Foreground' | 'Orphan' = 'Background',
    preconditions?: { uid?: string; resourceVersion?: string },
  ): Promise<boolean> {
    const doing = `deleting ${describeRef(ref)}`;
    // Whether an earlier attempt may have taken effect: a later "gone" is then this call's doing.
    let uncertain = false;
    let conflictIsTransient = false;
    try {
      return await this.retrying(
        doing,
        async () => {
          conflictIsTransient = false;
          try {
            await this.objects.delete(
              headerOf(ref),
              undefined,
              undefined,
              undefined,
              undefined,
              propagationPolicy,
              preconditions ? { propagationPolicy, preconditions } : undefined,
            );
            return true;
          } catch (err) {
            if (isNotFound(err)) return uncertain;
            if (statusOf(err) === 409 && preconditions) {
              const current = await this.reread(ref);
              if (!current) return uncertain;
              const sameObject = !preconditions.uid || current.metadata?.uid === preconditions.uid;
              const sameVersion =
                !preconditions.resourceVersion || current.metadata?.resourceVersion === preconditions.resourceVersion;
              if (uncertain && (!sameObject || current.metadata?.deletionTimestamp)) return true;
              // The very object the preconditions name, unchanged: the conflict was not about them.
              conflictIsTransient = sameObject && sameVersion;
            }
            if (outcomeUnknown(err)) uncertain = true;
            throw err;
          }
        },
        (err) => isTransient(err) || (conflictIsTransient && statusOf(err) === 409),
      );
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /**
   * Creates the object. A 429/503 or a refused connection is repeated; after a failure that leaves the outcome
   * unknown (a reset or timeout once the request was sent, a 5xx), the object is re-read first: there, it is returned.
   */
  async create<T extends KubernetesObject>(obj: T): Promise<T> {
    const ref = refOf(obj);
    const doing = `creating ${describeRef(ref)}`;
    let uncertain = false;
    try {
      return await this.retrying(doing, async () => {
        if (uncertain) {
          const current = await this.reread<T>(ref);
          if (current) return current;
        }
        try {
          return await this.objects.create(obj);
        } catch (err) {
          // AlreadyExists after an attempt that may have created it: ours.
          if (statusOf(err) === 409 && uncertain) {
            const current = await this.reread<T>(ref);
            if (current) return current;
          }
          if (outcomeUnknown(err)) uncertain = true;
          throw err;
        }
      });
    } catch (err) {
      throw kubeFailure(err, doing);
    }
  }

  /**
   * A JSON merge patch (RFC 7386) of fields no apply manages, e.g. removing owner references; put
   * `metadata.resourceVersion` in the patch to make it conditional (409 when the object changed meanwhile).
   * A 429/503 or a refused connection is repeated; after a failure that leaves the outcome unknown the object is
   * re-read first, and an object that already holds the patch is the result (so is one after a 409 that the
   * unknown attempt's own change caused).
   */
  async mergePatch<T extends KubernetesObject>(ref: ObjectRef, patch: Record<string, unknown>): Promise<T> {
    const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
    const body = {
      ...patch,
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      metadata: { ...metadata, name: ref.name, namespace: ref.namespace },
    };
    const { resourceVersion: _precondition, ...fields } = metadata;
    const wanted = { ...patch, metadata: fields };
    const doing = `patching ${describeRef(ref)}`;
    let uncertain = false;
    const alreadyPatched = async (): Promise<T | undefined> => {
      const current = await this.reread<T>(ref);
      return current && holdsMergePatch(current, wanted) ? current : undefined;
    };
    try {
      return await this.retrying(doing, async () => {
        if (uncertain) {
          const done = await alreadyPatched();
          if (done) return done;
        }
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
          if (statusOf(err) === 409 && uncertain) {
            const done = await alreadyPatched();
            if (done) return done;
          }
          if (outcomeUnknown(err)) uncertain = true;
          throw err;
        }
      });
    } catch (err) {
      throw kubeFailure(err, doing);
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
   * true, the signal aborts, or `timeoutMs` passes; re-establishes the watch at once when the server closes it or the
   * stream is cut. Returns whether `onEvent` said done; throws when a watch cannot be established (403: `Forbidden`).
   */
  async watchUntil<T>(
    path: string,
    query: Record<string, string | undefined>,
    onEvent: (ev: WatchEvent<T>) => boolean | Promise<boolean>,
    opts: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<boolean> {
    return watchCollectionUntil(this.kc, path, query, onEvent, opts);
  }
}

const headerOf = (ref: ObjectRef) => ({
  apiVersion: ref.apiVersion,
  kind: ref.kind,
  metadata: { name: ref.name, namespace: ref.namespace },
});

/** The current activity's cancellation, when there is one: retries stop with it. */
function cancellation(): { signal?: AbortSignal } {
  try {
    return { signal: Context.current().cancellationSignal };
  } catch {
    return {};
  }
}
