// Ferry's own metrics, on the Runtime's meter: the SDK's Prometheus exporter serves them with its own on one port
// (FERRY_METRICS_ADDRESS). Labels are bounded: steps, phases, outcomes and reasons of the failure catalogue (anything
// else is `Other`), and for the per-model gauges a model's namespace and name — never pods, requests or error text.
import type { V1Deployment } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import type { MetricMeter } from '@temporalio/common';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Logger, Next } from '@temporalio/worker';
import { LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_MODEL, MANAGED_BY } from '../activities/builders/labels.js';
import type { ModelWatcher, WatchStats } from '../activities/cluster/model-watcher.js';
import {
  FAILURE,
  runningOnCluster,
  ferryPhaseKey,
  PHASES,
  type ModelEvent,
  type Phase,
} from '../workflows/contract/index.js';

/** Histogram buckets of Ferry's durations, in seconds: a health check's tenth of a second to an hour-long pull. */
export const DURATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 2400, 3600];
/** The histograms that take those buckets (the exporter's bucket overrides are per name). */
export const DURATION_HISTOGRAMS = ['ferry_step_duration_seconds', 'ferry_time_to_ready_seconds'] as const;

const KNOWN_TYPES = new Set<string>(Object.values(FAILURE));
/** A reason as a label: a catalogue type or a Kubernetes-style reason word; anything else is `Other`. */
export function reasonLabel(reason: string | undefined): string {
  if (!reason) return 'Other';
  return KNOWN_TYPES.has(reason) || /^[A-Z][A-Za-z]{1,47}$/.test(reason) ? reason : 'Other';
}

export class FerryMetrics {
  private readonly stepDuration;
  private readonly timeToReady;
  private readonly stepFailures;
  private readonly refusedChanges;
  private readonly tenantRefusals;
  private readonly activityFailures;
  private readonly teardownRetries;
  private readonly phaseChanges;
  private readonly pulledBytes;
  private readonly gpuSeconds;
  /** Per model, the fraction of a GPU-second not yet counted (the SDK's counters take whole numbers). */
  private readonly gpuSecondsCarry = new Map<string, number>();
  private readonly models;
  private readonly readyReplicas;
  private readonly downloadBytes;
  private readonly downloadTotalBytes;
  private readonly downloadRate;
  private readonly watchAge;
  private readonly watchQuiet;
  private readonly watchEnds;
  private readonly memory;
  /** The ends of each watch already counted (the watcher keeps totals; the counter takes increments). */
  private readonly watchEndsCounted = new Map<string, number>();
  /** Models whose ready-replicas series was set, so a model gone from the cluster is set to 0 once. */
  private readonly withReplicas = new Set<string>();
  /** Called when a model changed phase (the gauges are then brought up to date soon). */
  onPhaseChange: (() => void) | undefined;

  constructor(meter: MetricMeter) {
    this.stepDuration = meter.createHistogram(
      'ferry_step_duration_seconds',
      'float',
      's',
      'How long a lifecycle step took, by step and outcome',
    );
    this.timeToReady = meter.createHistogram(
      'ferry_time_to_ready_seconds',
      'float',
      's',
      'From the start of a generation to Ready (not counting recoveries from Degraded)',
    );
    this.stepFailures = meter.createCounter(
      'ferry_step_failures_total',
      '',
      'Failed attempts of a lifecycle step as the workflow saw them, by step, reason and whether it is retried',
    );
    this.refusedChanges = meter.createCounter(
      'ferry_refused_changes_total',
      '',
      'Signalled changes (the update signal) a workflow refused, by change and reason; the model stayed as it was',
    );
    this.tenantRefusals = meter.createCounter(
      'ferry_tenant_refusals_total',
      '',
      "Nexus requests a tenant's grant or ownership refused, by tenant and operation; nothing was started (docs/security.md)",
    );
    this.activityFailures = meter.createCounter(
      'ferry_activity_failures_total',
      '',
      'Failed activity attempts, by activity and failure type (retried by the activity retry policy or not)',
    );
    this.teardownRetries = meter.createCounter(
      'ferry_teardown_retries_total',
      '',
      'Teardowns that left something behind and were tried again, by reason',
    );
    this.phaseChanges = meter.createCounter('ferry_phase_changes_total', '', 'Models entering a phase, by phase');
    this.pulledBytes = meter.createCounter(
      'ferry_weights_pulled_bytes_total',
      'bytes',
      'Bytes of weights written by finished downloads',
    );
    this.gpuSeconds = meter.createCounter(
      'ferry_gpu_seconds_total',
      's',
      "GPU-seconds held by each model's ready replicas (ready replicas × resources.gpus × time; status.usage)",
    );
    this.models = meter.createGauge(
      'ferry_models',
      'int',
      '',
      "Running models on this worker's cluster, by phase (from Temporal visibility)",
    );
    this.readyReplicas = meter.createGauge(
      'ferry_model_ready_replicas',
      'int',
      '',
      "Ready engine replicas of each model (from the worker's watch)",
    );
    this.downloadBytes = meter.createGauge(
      'ferry_download_bytes',
      'int',
      'bytes',
      "Bytes each model's latest download has written, as its puller last reported them (every source)",
    );
    this.downloadTotalBytes = meter.createGauge(
      'ferry_download_total_bytes',
      'int',
      'bytes',
      "The size of each model's latest download, when its source states it",
    );
    this.downloadRate = meter.createGauge(
      'ferry_download_bytes_per_second',
      'int',
      'bytes/s',
      "The rate of each model's latest download over its puller's last interval (about 10 s); 0: stalled",
    );
    this.watchAge = meter.createGauge(
      'ferry_watch_age_seconds',
      'float',
      's',
      "How long the worker's watch of a kind in a namespace has been open (0: not open, being listed or paused)",
    );
    this.watchQuiet = meter.createGauge(
      'ferry_watch_last_event_seconds',
      'float',
      's',
      'Seconds since that watch last had an event, a bookmark or a list (bookmarks come before each renewal)',
    );
    this.watchEnds = meter.createCounter(
      'ferry_watch_restarts_total',
      '',
      'Ends of that watch, by how: renewed (the server, on schedule), cut (the server or the connection, early), ' +
        'stalled (the worker, the server late to end it), failed (an error; listed again)',
    );
    this.memory = meter.createGauge(
      'ferry_worker_memory_bytes',
      'int',
      'bytes',
      "The worker process's memory by kind: rss, heap_used, heap_total (the main thread's V8 heap: activities, the " +
        "watch's memory), external and array_buffers (Node buffers); the rest of rss is the workflow thread's heap " +
        '(the cached workflows) and native memory (the Temporal core, code)',
    );
  }

  /** The worker process's memory (process.memoryUsage): resident set, V8 heap used and total, external, buffers. */
  setMemory(usage: NodeJS.MemoryUsage = process.memoryUsage()): void {
    this.memory.set(usage.rss, { kind: 'rss' });
    this.memory.set(usage.heapUsed, { kind: 'heap_used' });
    this.memory.set(usage.heapTotal, { kind: 'heap_total' });
    this.memory.set(usage.external, { kind: 'external' });
    this.memory.set(usage.arrayBuffers, { kind: 'array_buffers' });
  }

  /** Each watch's age, quiet and ends, from the watcher's totals. */
  setWatches(stats: readonly WatchStats[], now = Date.now()): void {
    for (const w of stats) {
      const labels = { namespace: w.namespace, kind: w.kind };
      this.watchAge.set(w.openedAt === undefined ? 0 : (now - w.openedAt) / 1000, labels);
      if (w.lastEventAt !== undefined) this.watchQuiet.set((now - w.lastEventAt) / 1000, labels);
      for (const [how, total] of Object.entries(w.ends)) {
        const key = `${w.namespace}/${w.kind}/${how}`;
        const counted = this.watchEndsCounted.get(key) ?? 0;
        if (total > counted) this.watchEnds.add(total - counted, { ...labels, how });
        this.watchEndsCounted.set(key, total);
      }
    }
  }

  /** What a model's workflow reported (the `ferry` sink). */
  record(events: readonly ModelEvent[], model?: { namespace: string; name: string }): void {
    for (const event of events) {
      switch (event.kind) {
        case 'usage':
          if (model) this.countGpuSeconds(model, event.gpuSeconds);
          break;
        case 'stepEnded':
          this.stepDuration.record(event.durationMs / 1000, { step: event.step, outcome: event.outcome });
          // The pull's seconds are the download step's: ferry_step_duration_seconds{step="download"}.
          if (event.step === 'download' && event.outcome === 'Succeeded') this.pulledBytes.add(event.bytes ?? 0);
          break;
        case 'stepFailed':
          this.stepFailures.add(1, {
            step: event.step,
            reason: reasonLabel(event.reason),
            retrying: String(event.retrying),
          });
          if (event.step === 'teardown' && event.retrying)
            this.teardownRetries.add(1, { reason: reasonLabel(event.reason) });
          break;
        case 'changeRefused':
          this.refusedChanges.add(1, { change: event.change, reason: reasonLabel(event.reason) });
          break;
        case 'phaseChanged':
          this.phaseChanges.add(1, { phase: event.to });
          this.onPhaseChange?.();
          if (event.readyAfterMs !== undefined) this.timeToReady.record(event.readyAfterMs / 1000);
          break;
        default:
          break;
      }
    }
  }

  private countGpuSeconds({ namespace, name }: { namespace: string; name: string }, seconds: number): void {
    const key = `${namespace}/${name}`;
    const total = (this.gpuSecondsCarry.get(key) ?? 0) + seconds;
    const whole = Math.floor(total);
    this.gpuSecondsCarry.set(key, total - whole);
    if (whole > 0) this.gpuSeconds.add(whole, { namespace, model: name });
  }

  /** A tenant's Nexus request refused (`operation`: ensureModel, deleteModel, getModelStatus). */
  tenantRefused(tenant: string, operation: string): void {
    this.tenantRefusals.add(1, { tenant, operation });
  }

  activityFailed(activity: string, type: string): void {
    this.activityFailures.add(1, { activity, type });
  }

  /** A download's report (the progress the puller's activity signals), for the workflow `servedmodel/<c>/<ns>/<name>`. */
  downloadProgress(
    workflowId: string,
    progress: { bytes?: number; totalBytes?: number; bytesPerSecond?: number },
  ): void {
    const [, , namespace, model] = workflowId.split('/');
    if (!namespace || !model) return;
    const labels = { namespace, model };
    if (progress.bytes !== undefined) this.downloadBytes.set(progress.bytes, labels);
    if (progress.totalBytes !== undefined) this.downloadTotalBytes.set(progress.totalBytes, labels);
    if (progress.bytesPerSecond !== undefined) this.downloadRate.set(progress.bytesPerSecond, labels);
  }

  /** Every phase's count (0 for phases no model is in). */
  setModels(counts: Partial<Record<Phase, number>>): void {
    for (const phase of PHASES) this.models.set(counts[phase] ?? 0, { phase });
  }

  /** Each model's ready replicas; a model no longer listed is set to 0 (the exporter cannot drop a series). */
  setReadyReplicas(replicas: ReadonlyMap<string, { namespace: string; model: string; ready: number }>): void {
    for (const key of this.withReplicas) {
      if (replicas.has(key)) continue;
      const [namespace, model] = key.split('/') as [string, string];
      this.readyReplicas.set(0, { namespace, model });
      this.withReplicas.delete(key);
    }
    for (const [key, { namespace, model, ready }] of replicas) {
      this.readyReplicas.set(ready, { namespace, model });
      this.withReplicas.add(key);
    }
  }
}

/** Counts every failed activity attempt by the failure's type (the catalogue's; `Other` for anything else). */
export class ActivityFailureCounter implements ActivityInboundCallsInterceptor {
  constructor(
    private readonly metrics: FerryMetrics,
    private readonly activity: string,
  ) {}

  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    try {
      return await next(input);
    } catch (err) {
      const type = err instanceof ApplicationFailure ? err.type : undefined;
      const cancelled = (err as Error | undefined)?.name === 'CancelledFailure';
      this.metrics.activityFailed(this.activity, cancelled ? 'Cancelled' : reasonLabel(type ?? undefined));
      throw err;
    }
  }
}

/** How often the gauges are brought up to date without a phase change. */
const GAUGE_INTERVAL_MS = 30_000;
/** After a phase change, this long for visibility to index the new search attribute. */
const AFTER_PHASE_CHANGE_MS = 2_000;

const ENGINES = `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=engine`;

/**
 * Keeps the gauges current: models by phase from Temporal visibility (this cluster's running workflows; one list
 * call per interval and shortly after a phase change, not a billed action), ready replicas from the watch's memory
 * (no API call). Returns a stop.
 */
export function collectGauges({
  metrics,
  client,
  cluster,
  watcher,
  logger,
  intervalMs = GAUGE_INTERVAL_MS,
}: {
  metrics: FerryMetrics;
  client: Client;
  cluster: string;
  watcher: ModelWatcher | undefined;
  logger: Logger;
  intervalMs?: number;
}): () => void {
  let failing = false;
  const query = runningOnCluster(cluster);
  const once = async () => {
    metrics.setMemory();
    try {
      const counts: Partial<Record<Phase, number>> = {};
      for await (const execution of client.workflow.list({ query })) {
        const phase = execution.typedSearchAttributes.get(ferryPhaseKey) as Phase | undefined;
        if (phase && PHASES.includes(phase)) counts[phase] = (counts[phase] ?? 0) + 1;
      }
      metrics.setModels(counts);
      failing = false;
    } catch (err) {
      if (!failing) logger.warn('cannot count models by phase for ferry_models', { error: String(err) });
      failing = true;
    }
    if (!watcher) return;
    metrics.setWatches(watcher.watchStats());
    const replicas = new Map<string, { namespace: string; model: string; ready: number }>();
    for (const namespace of watcher.watchedNamespaces) {
      const engines = watcher.list<V1Deployment>('Deployment', namespace, ENGINES);
      // A namespace whose watch is not (re)synced yet would look empty: keep the last values.
      if (engines === null) return;
      for (const d of engines) {
        const model = d.metadata?.labels?.[LABEL_MODEL];
        if (model) replicas.set(`${namespace}/${model}`, { namespace, model, ready: d.status?.readyReplicas ?? 0 });
      }
    }
    metrics.setReadyReplicas(replicas);
  };
  void once();
  const timer = setInterval(() => void once(), intervalMs);
  timer.unref();
  let soon: NodeJS.Timeout | undefined;
  metrics.onPhaseChange = () => {
    soon ??= setTimeout(() => {
      soon = undefined;
      void once();
    }, AFTER_PHASE_CHANGE_MS).unref();
  };
  return () => {
    clearInterval(timer);
    clearTimeout(soon);
    metrics.onPhaseChange = undefined;
  };
}
