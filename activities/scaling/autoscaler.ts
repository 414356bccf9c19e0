// The worker's autoscaler (docs/design/scaling.md): every interval it reads each scaling model's load from its ready
// replicas' /metrics and feeds the pure rule (rule.ts); only a decision — another replica count — reaches the
// model's workflow, as one `ferry.scale` signal. Steady load sends nothing and writes nothing to history. A model that
// may go to zero now (its policy has idleToZeroAfterMs) has its front read first, from the front pods' exporters, for
// the idle rule (idle.ts): no request for that long — through the front, nor in the engine's replicas — → 0, and at
// zero a request held → its floor at once. What it
// remembers (the rules' windows) lives only here: a restarted worker starts its windows again, and a decision it had
// sent is already in the workflow's history.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { ScaleDecision, ScalingPolicy } from '../../workflows/contract/index.js';
import { ANNOTATION_SCALING, LABEL_COMPONENT, LABEL_MODEL, selectorLabels } from '../builders/labels.js';
import { slotBase } from '../builders/names.js';
import { ENGINE_CONTAINER } from '../builders/deployment.js';
import { FRONT_METRICS_PORT, frontSelectorLabels } from '../builders/front-objects.js';
import { labelSelectorOf } from '../cluster/model-reads.js';
import type { ModelWatcher } from '../cluster/model-watcher.js';
import type { EndpointResolver } from '../deps.js';
import { isPodReady } from '../readers/revision.js';
import { decide, EMPTY_MEMORY, type ScalerMemory } from './rule.js';
import { idleVerdict, type FrontSample, type IdleMemory } from './idle.js';
import { frontLoad, replicaLoad } from './load.js';

export interface AutoscalerOptions {
  watcher: ModelWatcher;
  endpoints: EndpointResolver;
  http?: typeof fetch;
  /** Sends a decision to the model's workflow (a `ferry.scale` signal). */
  send: (model: { namespace: string; name: string }, decision: ScaleDecision) => Promise<void>;
  /** Between two readings of every model. */
  intervalMs: number;
  /** One replica's (or front pod's) /metrics must answer within this. Default: the interval, at most 5 s. */
  timeoutMs?: number;
  log?: (level: 'info' | 'warn', message: string, meta?: Record<string, unknown>) => void;
  now?: () => number;
}

interface Tracked {
  memory: ScalerMemory;
  /** The idle rule's, for a model that may go to zero. */
  idle: IdleMemory;
  policyText: string;
  /** The decision sent last, until the Deployment shows another count than the one it was made against. */
  sent?: { decision: ScaleDecision; at: number };
}

/** A decision sent and not yet seen applied is sent again after this long (the signal may have failed). */
const RESEND_AFTER_MS = 60_000;

export class Autoscaler {
  private readonly models = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: AutoscalerOptions) {}

  start(): void {
    const loop = async () => {
      await this.tick().catch((err: unknown) =>
        this.options.log?.('warn', 'autoscaler round failed', { error: String(err) }),
      );
      if (!this.stopped) this.timer = setTimeout(() => void loop(), this.options.intervalMs);
    };
    this.timer = setTimeout(() => void loop(), this.options.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One round: every scaling model the watch knows, read and decided on together. */
  async tick(): Promise<void> {
    const { watcher } = this.options;
    const seen = new Set<string>();
    const rounds: Promise<void>[] = [];
    for (const namespace of watcher.watchedNamespaces) {
      const deployments = watcher.list<V1Deployment>('Deployment', namespace, `${LABEL_COMPONENT}=engine`) ?? [];
      for (const deployment of deployments) {
        const name = deployment.metadata?.labels?.[LABEL_MODEL];
        const policyText = deployment.metadata?.annotations?.[ANNOTATION_SCALING];
        if (!name || !policyText || deployment.metadata?.deletionTimestamp) continue;
        const key = `${namespace}/${name}`;
        seen.add(key);
        rounds.push(this.readModel(key, namespace, name, deployment, policyText));
      }
    }
    await Promise.all(rounds);
    for (const key of this.models.keys()) if (!seen.has(key)) this.models.delete(key);
  }

  private async readModel(
    key: string,
    namespace: string,
    name: string,
    deployment: V1Deployment,
    policyText: string,
  ): Promise<void> {
    const policy = parsePolicy(policyText);
    if (!policy) {
      this.options.log?.('warn', 'a Deployment carries a scaling policy that cannot be read', { model: key });
      return;
    }
    const tracked = this.track(key, policyText);
    const current = deployment.spec?.replicas ?? 1;
    const at = (this.options.now ?? Date.now)();
    if (tracked.sent && (tracked.sent.decision.from !== current || at - tracked.sent.at > RESEND_AFTER_MS)) {
      tracked.sent = undefined;
    }
    const decideOn = (replicas: number, reason: string) =>
      this.send(key, { namespace, name }, tracked, { replicas, from: current, reason }, at);
    const idleAfterMs = policy.idleToZeroAfterMs;
    // A model that may go to zero: its front first (unknown this round when no front pod is ready or one does not
    // answer: never zero on it, and the memory stays).
    const front = idleAfterMs !== undefined ? await this.readFront(namespace, name, at) : undefined;
    if (idleAfterMs !== undefined && current === 0) {
      // At zero there is no replica to read: only the front decides; the engine's windows start again on waking.
      tracked.memory = EMPTY_MEMORY;
      if (!front) return;
      const verdict = idleVerdict(idleAfterMs, tracked.idle, front, 0, policy.minReplicas);
      tracked.idle = verdict.memory;
      if (verdict.replicas !== undefined) await decideOn(verdict.replicas, verdict.reason);
      return;
    }
    const load = await this.engineLoad(namespace, name, deployment);
    if (idleAfterMs !== undefined && front) {
      // Requests in the engine are activity too, whatever way they came (a client sent to a pod, not the front).
      if (load !== undefined && load > 0) tracked.idle = { ...tracked.idle, busyAt: at };
      const verdict = idleVerdict(idleAfterMs, tracked.idle, front, current, policy.minReplicas);
      tracked.idle = verdict.memory;
      // Zero only on an engine known to be idle (a replica that did not answer may be serving).
      if (verdict.replicas === 0 && load === 0) {
        await decideOn(0, verdict.reason);
        return;
      }
    }
    // No replica read: nothing is known of the load (the count in force waits for them).
    if (load === undefined) return;
    const decision = decide(policy, tracked.memory, { at, load }, current);
    tracked.memory = decision.memory;
    if (decision.replicas === undefined) return;
    await decideOn(decision.replicas, decision.reason);
  }

  /**
   * The requests in flight of the model's ready replicas, summed; undefined when there is none to read, or one did
   * not answer (a partial sum would call for too few).
   */
  private async engineLoad(namespace: string, name: string, deployment: V1Deployment): Promise<number | undefined> {
    const port = enginePort(deployment);
    // The Deployment's own pods: the current revision's, in whichever slot it is (docs/design/rollout.md, section 2).
    const slot = deployment.metadata?.name === slotBase(name, 'b') ? 'b' : undefined;
    const pods = this.readyPods(namespace, deployment.spec?.selector?.matchLabels ?? selectorLabels(name));
    if (pods.length === 0 || port === undefined) return undefined;
    const loads = await Promise.all(
      pods.map(async (pod) => {
        const text = await this.metrics(namespace, name, port, pod, slot);
        return text === undefined ? undefined : replicaLoad(text);
      }),
    );
    if (loads.some((l) => l === undefined)) return undefined;
    return (loads as number[]).reduce((sum, l) => sum + l, 0);
  }

  /** What is remembered of the model; a new policy (an update, a measured target, a window) starts it again. */
  private track(key: string, policyText: string): Tracked {
    let tracked = this.models.get(key);
    if (!tracked || tracked.policyText !== policyText) {
      tracked = { memory: EMPTY_MEMORY, idle: {}, policyText };
      this.models.set(key, tracked);
    }
    return tracked;
  }

  /** Sends `decision` unless the one sent last is not yet seen applied (and not yet due again). */
  private async send(
    key: string,
    model: { namespace: string; name: string },
    tracked: Tracked,
    decision: ScaleDecision,
    at: number,
  ): Promise<void> {
    if (tracked.sent) return;
    try {
      await this.options.send(model, decision);
      tracked.sent = { decision, at };
      this.options.log?.('info', 'scale decision sent', { model: key, ...decision });
    } catch (err) {
      this.options.log?.('warn', 'could not send a scale decision; deciding again next round', {
        model: key,
        error: String(err),
      });
    }
  }

  /** The ready pods, not being deleted, that `labels` select. */
  private readyPods(namespace: string, labels: Record<string, string>): V1Pod[] {
    return (this.options.watcher.list<V1Pod>('Pod', namespace, labelSelectorOf(labels)) ?? []).filter(
      (p) => isPodReady(p) && !p.metadata?.deletionTimestamp,
    );
  }

  /**
   * The model's front, summed over its ready pods' exporters; undefined when nothing is known of it: no front pod ready,
   * or one that did not answer with both counts (a partial sum could call a busy model idle).
   */
  private async readFront(namespace: string, name: string, at: number): Promise<FrontSample | undefined> {
    const pods = this.readyPods(namespace, frontSelectorLabels(name));
    if (pods.length === 0) return undefined;
    const loads = await Promise.all(
      pods.map(async (pod) => {
        const text = await this.metrics(namespace, name, FRONT_METRICS_PORT, pod);
        return text === undefined ? undefined : frontLoad(text);
      }),
    );
    let requests = 0;
    let inFlight = 0;
    for (const load of loads) {
      if (!load) return undefined;
      requests += load.requests;
      inFlight += load.inFlight;
    }
    return { at, requests, inFlight };
  }

  /** A pod's GET /metrics on `port`, or undefined when it did not answer in time with a success. */
  private async metrics(
    namespace: string,
    name: string,
    port: number,
    pod: V1Pod,
    slot?: 'b',
  ): Promise<string | undefined> {
    const address = { metadata: { name, namespace }, spec: { engine: { port } }, ...(slot ? { slot } : {}) };
    const { intervalMs, timeoutMs } = this.options;
    try {
      const base = await this.options.endpoints(address, { name: pod.metadata!.name!, ip: pod.status?.podIP });
      const res = await (this.options.http ?? fetch)(`${base}/metrics`, {
        signal: AbortSignal.timeout(timeoutMs ?? Math.min(intervalMs, 5_000)),
      });
      if (!res.ok) return undefined;
      return await res.text();
    } catch {
      return undefined;
    }
  }
}

/** vLLM's port: the engine container's first. */
function enginePort(deployment: V1Deployment): number | undefined {
  const container = deployment.spec?.template?.spec?.containers?.find((c) => c.name === ENGINE_CONTAINER);
  return container?.ports?.[0]?.containerPort;
}

function parsePolicy(text: string): ScalingPolicy | undefined {
  try {
    const p = JSON.parse(text) as Partial<ScalingPolicy>;
    const numbers = [p.minReplicas, p.maxReplicas, p.targetConcurrency, p.scaleUpAfterMs, p.scaleDownAfterMs];
    if (!numbers.every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0)) return undefined;
    const idle = p.idleToZeroAfterMs;
    if (idle !== undefined && !(typeof idle === 'number' && Number.isFinite(idle) && idle > 0)) return undefined;
    return p as ScalingPolicy;
  } catch {
    return undefined;
  }
}
