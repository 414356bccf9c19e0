// The worker's autoscaler (docs/design/scaling.md): every interval it reads each scaling model's load from its ready
// replicas' /metrics and feeds the pure rule (rule.ts); only a decision — another replica count — reaches the
// model's workflow, as one `ferry.scale` signal. Steady load sends nothing and writes nothing to history. What it
// remembers (the rule's windows) lives only here: a restarted worker starts its windows again, and a decision it had
// sent is already in the workflow's history.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { ScaleDecision, ScalingPolicy } from '../../workflows/contract/index.js';
import { ANNOTATION_SCALING, LABEL_COMPONENT, LABEL_MODEL, selectorLabels } from '../builders/labels.js';
import { ENGINE_CONTAINER } from '../builders/deployment.js';
import { labelSelectorOf } from '../cluster/model-reads.js';
import type { ModelWatcher } from '../cluster/model-watcher.js';
import type { EndpointResolver } from '../deps.js';
import { isPodReady } from '../readers/revision.js';
import { decide, EMPTY_MEMORY, type ScalerMemory } from './rule.js';
import { replicaLoad } from './load.js';

export interface AutoscalerOptions {
  watcher: ModelWatcher;
  endpoints: EndpointResolver;
  http?: typeof fetch;
  /** Sends a decision to the model's workflow (a `ferry.scale` signal). */
  send: (model: { namespace: string; name: string }, decision: ScaleDecision) => Promise<void>;
  /** Between two readings of every model. */
  intervalMs: number;
  /** One replica's /metrics must answer within this. Default: the interval, at most 5 s. */
  timeoutMs?: number;
  log?: (level: 'info' | 'warn', message: string, meta?: Record<string, unknown>) => void;
  now?: () => number;
}

interface Tracked {
  memory: ScalerMemory;
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
    let tracked = this.models.get(key);
    // A new policy (an update, a measured target) starts the windows again.
    if (!tracked || tracked.policyText !== policyText) {
      tracked = { memory: EMPTY_MEMORY, policyText };
      this.models.set(key, tracked);
    }
    const current = deployment.spec?.replicas ?? 1;
    const port = enginePort(deployment);
    const pods = (
      this.options.watcher.list<V1Pod>('Pod', namespace, labelSelectorOf(selectorLabels(name))) ?? []
    ).filter((p) => isPodReady(p) && !p.metadata?.deletionTimestamp);
    // No replica to read: nothing is known of the load (the count in force waits for them).
    if (pods.length === 0 || port === undefined) return;
    const at = (this.options.now ?? Date.now)();
    const loads = await Promise.all(pods.map((pod) => this.readReplica(namespace, name, port, pod)));
    // A replica that did not answer leaves the load unknown: a partial sum would call for too few.
    if (loads.some((l) => l === undefined)) return;
    const load = (loads as number[]).reduce((sum, l) => sum + l, 0);
    const decision = decide(policy, tracked.memory, { at, load }, current);
    tracked.memory = decision.memory;
    if (tracked.sent && (tracked.sent.decision.from !== current || at - tracked.sent.at > RESEND_AFTER_MS)) {
      tracked.sent = undefined;
    }
    if (decision.replicas === undefined || tracked.sent) return;
    const sent: ScaleDecision = { replicas: decision.replicas, from: current, reason: decision.reason };
    try {
      await this.options.send({ namespace, name }, sent);
      tracked.sent = { decision: sent, at };
      this.options.log?.('info', 'scale decision sent', { model: key, ...sent });
    } catch (err) {
      this.options.log?.('warn', 'could not send a scale decision; deciding again next round', {
        model: key,
        error: String(err),
      });
    }
  }

  /** One replica's requests in flight, or undefined when its /metrics did not answer with them. */
  private async readReplica(namespace: string, name: string, port: number, pod: V1Pod): Promise<number | undefined> {
    const address = { metadata: { name, namespace }, spec: { engine: { port } } };
    const { intervalMs, timeoutMs } = this.options;
    try {
      const base = await this.options.endpoints(address, { name: pod.metadata!.name!, ip: pod.status?.podIP });
      const res = await (this.options.http ?? fetch)(`${base}/metrics`, {
        signal: AbortSignal.timeout(timeoutMs ?? Math.min(intervalMs, 5_000)),
      });
      if (!res.ok) return undefined;
      return replicaLoad(await res.text());
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
    return p as ScalingPolicy;
  } catch {
    return undefined;
  }
}
