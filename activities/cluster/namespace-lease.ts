// Which of a cluster's workers wakes the models of a namespace: the one that holds the namespace's Lease
// (`coordination.k8s.io`, named `ferry-watch-<cluster>`). Every worker watches; only the holder signals, so N workers
// do not send N signals per change. The holder renews every few seconds; one whose renewal has not been seen for the
// Lease's duration (10 s) is taken for gone and another takes the Lease over, at that moment rather than at its next
// round, so a killed holder's namespaces are woken again within 10 s and one renewal round of its last renewal.
// Expiry is judged by what this worker observed (the Lease's resourceVersion not moving for that long), not by the
// holder's clock, as client-go's leader election does. A worker whose Role may not touch Leases there wakes the namespace's models anyway (duplicates are
// harmless: a look is idempotent) and says so once.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { statusOf } from './request-retry.js';

/**
 * A Lease's times are MicroTime: the API server refuses a time without six digits of fraction, and client-node
 * writes a Date with three.
 */
class MicroTime extends Date {
  override toISOString(): string {
    return super.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
  }
  override toJSON(): string {
    return this.toISOString();
  }
}

export interface NamespaceLeaseOptions {
  /** The Lease's name in each namespace: one per cluster, `ferry-watch-<cluster>`. */
  name: string;
  /** This worker, as the Lease's holder. */
  identity: string;
  /**
   * How long a holder that stopped renewing keeps the Lease. Default 10 s: with the renewal every 4 s, another worker
   * takes over within about 14.4 s of a holder's loss (it sees a renewal at most one round late, then waits this).
   */
  durationSeconds?: number;
  /** How often the Lease is renewed, or looked at by a worker that does not hold it. Default 4 s. */
  renewMs?: number;
  /** This worker took the namespace's Lease over (or was given it): it now wakes that namespace's models. */
  onAcquired?: (namespace: string) => void;
  /**
   * Another worker renewed the namespace's Lease after `after` (this worker's clock: its look before the one that saw
   * the renewal), so that worker was alive then.
   */
  onRenewedElsewhere?: (namespace: string, after: number) => void;
  /** Whether this worker may hold Leases now (the current version's workers only); one that may not lets go. */
  eligible?: () => Promise<boolean>;
  log?: (level: 'info' | 'warn', message: string, meta?: Record<string, unknown>) => void;
}

interface NamespaceState {
  holds: boolean;
  /** The Lease's resourceVersion last seen, and when it was first seen (this worker's clock). */
  seen?: { resourceVersion: string; at: number };
  timer?: NodeJS.Timeout;
  /** Leases are refused here (403): wake anyway. */
  forbidden?: boolean;
  /** When this worker last read the Lease. */
  lookedAt?: number;
  /** The Lease as this worker last wrote it while holding it: renewed from this, without a read. */
  lease?: V1Lease;
}

export class NamespaceLeases {
  private readonly api: CoordinationV1Api;
  private readonly namespaces = new Map<string, NamespaceState>();
  private stopped = false;

  constructor(
    kc: KubeConfig,
    private readonly options: NamespaceLeaseOptions,
  ) {
    this.api = kc.makeApiClient(CoordinationV1Api);
  }

  private get renewMs(): number {
    return this.options.renewMs ?? 4_000;
  }

  private get durationMs(): number {
    return (this.options.durationSeconds ?? 10) * 1000;
  }

  /** Starts contending for `namespace`'s Lease (once; later calls do nothing). */
  track(namespace: string): void {
    if (this.stopped || this.namespaces.has(namespace)) return;
    const state: NamespaceState = { holds: false };
    this.namespaces.set(namespace, state);
    void this.round(namespace, state);
  }

  /** Whether this worker wakes `namespace`'s models: it holds the Lease, or Leases are refused there. */
  holds(namespace: string): boolean {
    const state = this.namespaces.get(namespace);
    return !!state && (state.holds || !!state.forbidden);
  }

  /** Stops, giving up every Lease held so that another worker takes it at its next look, not after the duration. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(
      [...this.namespaces].map(async ([namespace, state]) => {
        clearTimeout(state.timer);
        if (state.holds) await this.release(namespace, state).catch(() => undefined);
      }),
    );
  }

  /** Gives the Lease up: no holder, so the next worker to look takes it at once. */
  private async release(namespace: string, state: NamespaceState): Promise<void> {
    state.holds = false;
    state.lease = undefined;
    const lease = await this.read(namespace);
    if (lease?.spec?.holderIdentity !== this.options.identity) return;
    lease.spec = { ...lease.spec, holderIdentity: undefined, renewTime: undefined, acquireTime: undefined };
    await this.api.replaceNamespacedLease({ name: this.options.name, namespace, body: lease });
  }

  private async round(namespace: string, state: NamespaceState): Promise<void> {
    if (this.stopped) return;
    try {
      if (this.options.eligible && !(await this.options.eligible())) {
        if (state.holds) await this.release(namespace, state);
      } else await this.contend(namespace, state);
    } catch (err) {
      const code = statusOf(err);
      if (code === 403 && !state.forbidden) {
        state.forbidden = true;
        this.options.log?.('warn', 'may not use Leases in the namespace: waking its models whatever other workers do', {
          namespace,
        });
      } else if (code !== 409 && code !== 403) {
        this.options.log?.('warn', 'cannot read or renew the Lease; trying again', {
          namespace,
          error: String(err).split('\n')[0],
          ...(code ? { code } : {}),
        });
      }
      // A holder that cannot renew lets go before anyone may take over, so two never wake at once for long.
      if (state.holds && state.seen && Date.now() - state.seen.at >= this.durationMs - this.renewMs) {
        state.holds = false;
      }
    }
    if (this.stopped) return;
    let next = this.renewMs * (0.9 + Math.random() * 0.2);
    // A worker that does not hold the Lease looks again when it would expire, if that comes before its next round.
    if (!state.holds && state.seen)
      next = Math.max(0, Math.min(next, state.seen.at + this.durationMs + 50 - Date.now()));
    state.timer = setTimeout(() => void this.round(namespace, state), next);
    state.timer.unref();
  }

  private async contend(namespace: string, state: NamespaceState): Promise<void> {
    const now = new MicroTime();
    const me = this.options.identity;
    if (state.holds && state.lease) {
      // The holder renews what it last wrote: one request a round. A conflict (someone else wrote it) reads it again.
      try {
        return await this.renew(namespace, state, state.lease, now);
      } catch (err) {
        if (statusOf(err) !== 409 && statusOf(err) !== 404) throw err;
        state.lease = undefined;
      }
    }
    const lease = await this.read(namespace);
    if (!lease) {
      const created = await this.api.createNamespacedLease({
        namespace,
        body: {
          metadata: { name: this.options.name, labels: { 'app.kubernetes.io/managed-by': 'ferry' } },
          spec: {
            holderIdentity: me,
            leaseDurationSeconds: this.durationMs / 1000,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: 0,
          },
        },
      });
      return this.acquired(namespace, state, created);
    }
    const rv = lease.metadata?.resourceVersion ?? '';
    const lookedBefore = state.lookedAt ?? 0;
    state.lookedAt = Date.now();
    const moved = state.seen?.resourceVersion !== rv;
    if (moved) state.seen = { resourceVersion: rv, at: Date.now() };
    const holder = lease.spec?.holderIdentity;
    if (holder === me) return await this.renew(namespace, state, lease, now);
    state.holds = false;
    state.lease = undefined;
    const expired = !holder || Date.now() - state.seen!.at >= this.durationMs;
    if (!expired) {
      if (moved && holder) this.options.onRenewedElsewhere?.(namespace, lookedBefore);
      return;
    }
    lease.spec = {
      ...lease.spec,
      holderIdentity: me,
      leaseDurationSeconds: this.durationMs / 1000,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + (holder ? 1 : 0),
    };
    // Conditional on the resourceVersion read: of two workers taking over at once, one gets 409 and stays out.
    const taken = await this.api.replaceNamespacedLease({ name: this.options.name, namespace, body: lease });
    this.options.log?.('info', 'took over the Lease of the namespace', { namespace, from: holder ?? null });
    this.acquired(namespace, state, taken);
  }

  private async renew(namespace: string, state: NamespaceState, lease: V1Lease, now: MicroTime): Promise<void> {
    const acquired = lease.spec?.acquireTime;
    const body: V1Lease = {
      ...lease,
      spec: { ...lease.spec, renewTime: now, ...(acquired ? { acquireTime: new MicroTime(acquired) } : {}) },
    };
    const renewed = await this.api.replaceNamespacedLease({ name: this.options.name, namespace, body });
    if (state.holds) {
      state.lease = renewed;
      state.seen = { resourceVersion: renewed.metadata?.resourceVersion ?? '', at: Date.now() };
    } else this.acquired(namespace, state, renewed);
  }

  private acquired(namespace: string, state: NamespaceState, lease: V1Lease): void {
    state.lease = lease;
    state.seen = { resourceVersion: lease.metadata?.resourceVersion ?? '', at: Date.now() };
    const was = state.holds;
    state.holds = true;
    if (!was) this.options.onAcquired?.(namespace);
  }

  private async read(namespace: string): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.options.name, namespace });
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }
}
