// The worker's watch over the objects Ferry owns: one list+watch per kind and namespace (label
// app.kubernetes.io/managed-by=ferry), kept in memory. A change to a model's object wakes that model's workflow (the
// `wake` callback, coalesced per model); looks read from the same memory instead of asking the API server.
import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { cacheUsers, LABEL_CACHE } from '../builders/cache.js';
import { LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_MODEL, MANAGED_BY } from '../builders/labels.js';
import type { Cluster } from './api.js';
import { NamespaceLeases, type NamespaceLeaseOptions } from './namespace-lease.js';
import { watchOnce, type WatchEnd } from './watch-stream.js';

/** What the watcher keeps per namespace; every kind a Ready model's look reads. */
const WATCHED_KINDS = [
  { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps' },
  { apiVersion: 'v1', kind: 'PersistentVolumeClaim', plural: 'persistentvolumeclaims' },
  { apiVersion: 'v1', kind: 'Service', plural: 'services' },
  { apiVersion: 'v1', kind: 'Pod', plural: 'pods' },
  { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments' },
  { apiVersion: 'apps/v1', kind: 'ReplicaSet', plural: 'replicasets' },
] as const;
/** Kept too when the worker runs with a NetworkPolicy per model (FERRY_NETWORK_POLICY=on; its Role lists them then). */
const NETWORK_POLICY_KIND = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  plural: 'networkpolicies',
} as const;

type WatchedKind = (typeof WATCHED_KINDS)[number] | typeof NETWORK_POLICY_KIND;
type Kind = WatchedKind['kind'];

/** A model whose objects changed, and which (`Kind/name`). */
export interface ModelChange {
  namespace: string;
  name: string;
  objects: string[];
}

export interface ModelWatcherOptions {
  /** Tells a model's workflow that its objects changed; a failure is logged and forgotten (the safety net looks). */
  wake: (change: ModelChange) => Promise<void>;
  /** Events of one model within this long become one wake. Default 250 ms. */
  coalesceMs?: number;
  /** Keep the models' NetworkPolicies too (the worker runs with FERRY_NETWORK_POLICY=on). */
  networkPolicies?: boolean;
  /** Wait before a failed watch is started again (a refused list, an API server away). Default 2 s, doubling to 60 s. */
  restartMs?: number;
  /** The server ends each watch after this many seconds, plus up to as many again (jitter). Default 1,800. */
  watchSeconds?: number;
  /** A watch still open this long after the server should have ended it is ended by the worker. Default 60 s. */
  stallGraceMs?: number;
  log?: (level: 'info' | 'warn', message: string, meta?: Record<string, unknown>) => void;
  /**
   * Several workers on one cluster: each namespace's models are woken by the worker that holds its Lease
   * (namespace-lease.ts); the others keep their memory warm and what they would have sent, and send it when they take
   * the Lease over. Unset: this worker wakes every change.
   */
  lease?: Pick<NamespaceLeaseOptions, 'name' | 'identity' | 'durationSeconds' | 'renewMs' | 'eligible'>;
}

/** The selector every watch uses: only Ferry's objects. */
const SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
/**
 * A model's changes that never need a look: the pullers' Jobs and pods (of the weights, of the LoRA adapters) come
 * and go while a step waits for them.
 */
const QUIET_COMPONENTS = new Set(['puller', 'adapters']);
const MAX_RESTART_MS = 60_000;
/** A wake the workflow did not take is sent again after 2 s, doubling to a minute. */
const WAKE_RETRY_MS = 2_000;
/** A holder's wakes lag what it saw by its coalescing (250 ms) and its watch's delay: this much is not forgiven. */
const OWED_MARGIN_MS = 2_000;
/** A watch that ends sooner than this without an error is ended too fast to go on at once (410 Gone, a proxy). */
const MIN_WATCH_MS = 1_000;
/** A watch lasts 30 to 60 minutes before it is renewed from its resourceVersion (bookmarks keep that fresh). */
const WATCH_SECONDS = 1_800;

/** How a kind's watches in one namespace have gone since the worker started. */
export interface WatchStats {
  namespace: string;
  kind: string;
  /** When the watch now open was opened (undefined: none open, e.g. listing or pausing after a failure). */
  openedAt: number | undefined;
  /** When the last event (a bookmark included) arrived, or the watch was listed. */
  lastEventAt: number | undefined;
  /**
   * How the watches ended: `renewed` by the server on schedule; `cut` by the server or the connection before that;
   * `stalled`, ended by the worker when the server had not ended it in time; `failed`, an error (listed again).
   */
  ends: Record<'renewed' | 'cut' | 'stalled' | 'failed', number>;
}

/** One kind in one namespace: list, then watch from the list's resourceVersion; relist after 410 Gone or an error. */
class KindWatch {
  readonly objects = new Map<string, KubernetesObject>();
  synced = false;
  readonly stats: WatchStats;
  private resourceVersion = '';
  private stopped = false;
  private request: AbortController | undefined;
  private pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  constructor(
    private readonly kind: WatchedKind,
    private readonly namespace: string,
    private readonly kc: KubeConfig,
    private readonly cluster: Cluster,
    private readonly onChange: (obj: KubernetesObject) => void,
    private readonly options: ModelWatcherOptions,
  ) {
    this.stats = {
      namespace,
      kind: kind.kind,
      openedAt: undefined,
      lastEventAt: undefined,
      ends: { renewed: 0, cut: 0, stalled: 0, failed: 0 },
    };
    void this.run();
  }

  private get path(): string {
    const { apiVersion, plural } = this.kind;
    return `${apiVersion === 'v1' ? '/api/v1' : `/apis/${apiVersion}`}/namespaces/${this.namespace}/${plural}`;
  }

  private async run(): Promise<void> {
    const firstPause = this.options.restartMs ?? 2_000;
    let pauseMs = firstPause;
    while (!this.stopped) {
      const started = Date.now();
      let end: WatchEnd;
      try {
        if (!this.resourceVersion) await this.relist();
        end = await this.watch();
      } catch (err) {
        end = { how: 'failed', error: err instanceof Error ? err : new Error(String(err)) };
      }
      this.stats.openedAt = undefined;
      if (this.stopped || end.how === 'stopped') return;
      if (end.how !== 'failed') {
        const quick = Date.now() - started <= MIN_WATCH_MS;
        this.stats.ends[end.how === 'ended' && !quick ? 'renewed' : end.how === 'stalled' ? 'stalled' : 'cut']++;
        if (end.how === 'stalled') {
          this.options.log?.('warn', 'watch stalled: the server did not end it in time; watching again', {
            namespace: this.namespace,
            kind: this.kind.kind,
          });
        }
        // The server ended the watch on schedule, or the connection went: go on from the last resourceVersion (the
        // watch's own promise: nothing after it is missed). One that ended at once (410 Gone, a proxy) waits first.
        if (!quick) {
          pauseMs = firstPause;
          continue;
        }
      } else {
        // Events may have been missed: the next round lists afresh and wakes the models whose objects differ.
        this.stats.ends.failed++;
        this.synced = false;
        this.resourceVersion = '';
        this.options.log?.('warn', 'watch failed; listing again after a pause', {
          namespace: this.namespace,
          kind: this.kind.kind,
          error: end.error.message,
          retryInMs: pauseMs,
        });
      }
      await this.sleep(pauseMs);
      pauseMs = Math.min(pauseMs * 2, MAX_RESTART_MS);
    }
  }

  /** Lists, and reports every object that is new, changed or gone since the memory was last right. */
  private async relist(): Promise<void> {
    const { apiVersion, kind } = this.kind;
    const res: KubernetesListObject<KubernetesObject> = await this.cluster.objects.list(
      apiVersion,
      kind,
      this.namespace,
      undefined,
      undefined,
      undefined,
      undefined,
      SELECTOR,
    );
    const seen = new Set<string>();
    for (const obj of res.items) {
      const name = obj.metadata?.name ?? '';
      seen.add(name);
      const known = this.objects.get(name);
      this.objects.set(name, { apiVersion, kind, ...obj });
      if (known?.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.onChange(obj);
    }
    for (const [name, obj] of this.objects) {
      if (seen.has(name)) continue;
      this.objects.delete(name);
      this.onChange(obj);
    }
    this.resourceVersion = res.metadata?.resourceVersion ?? '';
    this.synced = true;
    this.stats.lastEventAt = Date.now();
  }

  /** One watch from the last resourceVersion, until it ends. */
  private watch(): Promise<WatchEnd> {
    this.request = new AbortController();
    if (this.stopped) this.request.abort();
    const seconds = this.options.watchSeconds ?? WATCH_SECONDS;
    this.stats.openedAt = Date.now();
    return watchOnce(this.kc, {
      path: this.path,
      query: { resourceVersion: this.resourceVersion, labelSelector: SELECTOR, allowWatchBookmarks: true },
      // A jitter keeps many watches from renewing at once.
      timeoutSeconds: seconds + Math.floor(Math.random() * seconds),
      graceMs: this.options.stallGraceMs ?? 60_000,
      onEvent: (type, obj) => this.event(type, obj),
      signal: this.request.signal,
    });
  }

  private event(type: string, obj: KubernetesObject & { code?: number }): void {
    this.stats.lastEventAt = Date.now();
    if (type === 'ERROR') {
      // 410 Gone: the resourceVersion is too old; the watch ends and the next round lists afresh.
      if (obj.code === 410) this.resourceVersion = '';
      return;
    }
    if (obj.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
    if (type === 'BOOKMARK') return;
    const name = obj.metadata?.name ?? '';
    if (type === 'DELETED') this.objects.delete(name);
    else this.objects.set(name, { apiVersion: this.kind.apiVersion, kind: this.kind.kind, ...obj });
    this.onChange(obj);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.pause = { timer: setTimeout(resolve, ms), resolve };
    });
  }

  stop(): void {
    this.stopped = true;
    this.request?.abort();
    if (this.pause) {
      clearTimeout(this.pause.timer);
      this.pause.resolve();
    }
  }
}

class NamespaceWatch {
  readonly kinds = new Map<Kind, KindWatch>();

  constructor(
    namespace: string,
    kc: KubeConfig,
    cluster: Cluster,
    onChange: (kind: Kind, obj: KubernetesObject) => void,
    options: ModelWatcherOptions,
  ) {
    const kinds: WatchedKind[] = [...WATCHED_KINDS, ...(options.networkPolicies ? [NETWORK_POLICY_KIND] : [])];
    for (const k of kinds) {
      this.kinds.set(k.kind, new KindWatch(k, namespace, kc, cluster, (obj) => onChange(k.kind, obj), options));
    }
  }

  get synced(): boolean {
    return [...this.kinds.values()].every((k) => k.synced);
  }

  stop(): void {
    for (const k of this.kinds.values()) k.stop();
  }
}

/** A label selector of `k=v` terms, as the reads use them. */
function matches(labels: Record<string, string> | undefined, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').every((term) => {
    const [key, value] = term.split('=');
    return labels?.[key!] === value;
  });
}

export class ModelWatcher {
  private readonly namespaces = new Map<string, NamespaceWatch>();
  private readonly pending = new Map<string, { change: ModelChange; timer: NodeJS.Timeout }>();
  /** Changes seen in namespaces whose Lease another worker holds: sent if this one takes it over in time. */
  private readonly owed = new Map<string, { change: ModelChange; at: number }>();
  private readonly leases: NamespaceLeases | undefined;
  private stopped = false;

  constructor(
    private readonly kc: KubeConfig,
    private readonly cluster: Cluster,
    private readonly options: ModelWatcherOptions,
  ) {
    if (options.lease) {
      this.leases = new NamespaceLeases(kc, {
        ...options.lease,
        onAcquired: (namespace) => this.payOwed(namespace),
        onRenewedElsewhere: (namespace, after) => this.forgive(namespace, after),
        ...(options.log ? { log: options.log } : {}),
      });
    }
  }

  /** Whether this worker wakes `namespace`'s models now (it holds the Lease, or there is none to share). */
  wakes(namespace: string): boolean {
    return !this.leases || this.leases.holds(namespace);
  }

  /** Starts watching `namespace` (once; later calls do nothing). */
  watchNamespace(namespace: string): void {
    if (this.stopped || this.namespaces.has(namespace)) return;
    this.options.log?.('info', 'watching namespace', { namespace });
    this.leases?.track(namespace);
    this.namespaces.set(
      namespace,
      new NamespaceWatch(namespace, this.kc, this.cluster, (kind, obj) => this.changed(kind, obj), this.options),
    );
  }

  get watchedNamespaces(): string[] {
    return [...this.namespaces.keys()];
  }

  /** How each kind's watch in each namespace is doing (for the worker's metrics). */
  watchStats(): WatchStats[] {
    return [...this.namespaces.values()].flatMap((ns) => [...ns.kinds.values()].map((k) => k.stats));
  }

  /** True when every kind of `namespace` has been listed: reads from memory are then as good as a GET. */
  isSynced(namespace: string): boolean {
    return this.namespaces.get(namespace)?.synced ?? false;
  }

  /** Whether the watch keeps objects of `kind` (in every namespace it watches). */
  keeps(kind: string): kind is Kind {
    return (
      WATCHED_KINDS.some((k) => k.kind === kind) ||
      (kind === NETWORK_POLICY_KIND.kind && !!this.options.networkPolicies)
    );
  }

  /** The object from memory, or `null` when the namespace is not synced or the kind not kept (ask the API server). */
  get<T extends KubernetesObject>(kind: Kind, namespace: string, name: string): T | undefined | null {
    const objects = this.isSynced(namespace) ? this.namespaces.get(namespace)!.kinds.get(kind)?.objects : undefined;
    return objects ? (objects.get(name) as T | undefined) : null;
  }

  /** The objects from memory, or `null` when the namespace is not synced or the kind not kept. */
  list<T extends KubernetesObject>(kind: Kind, namespace: string, labelSelector?: string): T[] | null {
    const objects = this.isSynced(namespace) ? this.namespaces.get(namespace)!.kinds.get(kind)?.objects : undefined;
    if (!objects) return null;
    return [...objects.values()].filter((o) => matches(o.metadata?.labels, labelSelector)) as T[];
  }

  /** Stops watching; resolves once every Lease held is given up (another worker takes it at its next look). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const { timer } of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
    for (const ns of this.namespaces.values()) ns.stop();
    await this.leases?.stop();
  }

  /** This worker took `namespace`'s Lease: what it saw while another held it, and that one may not have sent, goes. */
  private payOwed(namespace: string): void {
    for (const [key, { change }] of this.owed) {
      if (change.namespace !== namespace) continue;
      this.owed.delete(key);
      for (const object of change.objects) this.note(key, change.namespace, change.name, object);
    }
  }

  /** The holder was alive after `after`: it sent what it saw up to then (less its coalescing and its watch's lag). */
  private forgive(namespace: string, after: number): void {
    for (const [key, { change, at }] of this.owed) {
      if (change.namespace === namespace && at < after - OWED_MARGIN_MS) this.owed.delete(key);
    }
  }

  private changed(kind: Kind, obj: KubernetesObject): void {
    const labels = obj.metadata?.labels;
    const namespace = obj.metadata?.namespace;
    if (this.stopped || !namespace || QUIET_COMPONENTS.has(labels?.[LABEL_COMPONENT] ?? '')) return;
    // A model's object names its model; a shared cache's volume is no one model's, and wakes every model using it.
    const model = labels?.[LABEL_MODEL];
    const models = model ? [model] : kind === 'PersistentVolumeClaim' && labels?.[LABEL_CACHE] ? cacheUsers(obj) : [];
    const object = `${kind}/${obj.metadata?.name}`;
    for (const name of models) {
      const key = `${namespace}/${name}`;
      if (this.wakes(namespace)) {
        this.note(key, namespace, name, object);
        continue;
      }
      const owed = this.owed.get(key);
      if (!owed) this.owed.set(key, { change: { namespace, name, objects: [object] }, at: Date.now() });
      else {
        owed.at = Date.now();
        if (!owed.change.objects.includes(object) && owed.change.objects.length < 8) owed.change.objects.push(object);
      }
    }
  }

  /** A change to send: joins the one pending for the model, or starts its coalescing window. */
  private note(key: string, namespace: string, name: string, object: string): void {
    const pending = this.pending.get(key);
    if (pending) {
      if (!pending.change.objects.includes(object) && pending.change.objects.length < 8) {
        pending.change.objects.push(object);
      }
      return;
    }
    this.queue(key, { namespace, name, objects: [object] });
  }

  /** Sends `change` after the coalescing window; a send that fails is tried again, merged with any newer change. */
  private queue(key: string, change: ModelChange, attempt = 0): void {
    const delay =
      attempt === 0 ? (this.options.coalesceMs ?? 250) : Math.min(WAKE_RETRY_MS * 2 ** (attempt - 1), 60_000);
    const timer = setTimeout(() => {
      this.pending.delete(key);
      this.options.wake(change).catch((err: unknown) => {
        if (this.stopped) return;
        // The safety net is hours away: a wake Temporal did not take is sent again until it does.
        if (attempt === 0) {
          this.options.log?.('warn', 'could not wake the model; trying again', { model: key, error: String(err) });
        }
        const newer = this.pending.get(key);
        if (newer) {
          for (const o of change.objects) if (!newer.change.objects.includes(o)) newer.change.objects.push(o);
          newer.change.objects.splice(8);
        } else this.queue(key, change, attempt + 1);
      });
    }, delay);
    this.pending.set(key, { change, timer });
  }
}
