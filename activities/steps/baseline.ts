// measureBaseline: the highest concurrency at which one ready replica meets the model's latency goal (`spec.slo`),
// found by streaming requests straight to that replica's pod (docs/design/baseline.md). Never through the Service,
// which would spread the load over every replica, and never through the API server's proxy, which it would load:
// a worker that reaches engines only that way does not measure.
import { Context } from '@temporalio/activity';
import {
  FAILURE,
  failure,
  parseDuration,
  type BaselineMeasurement,
  type ModelInput,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { findMaxConcurrency, probe, vocabularyIds, type LatencyGoal, type ProbeResult } from '../baseline/index.js';
import { readEngine } from '../cluster/model-reads.js';
import type { ActivityDeps } from '../deps.js';
import { isPodReady } from '../readers/revision.js';
import { keyNotHeld, type ApiKeyResolver } from './health.js';

/** A request gets four times what the goal allows it, and never less than 30 s, before it counts as failed. */
const REQUEST_TIMEOUT_FACTOR = 4;
const REQUEST_TIMEOUT_MIN_MS = 30_000;

export async function measureBaseline(
  deps: ActivityDeps,
  { model, slot }: ModelInput,
  apiKeys?: ApiKeyResolver,
): Promise<BaselineMeasurement> {
  const started = performance.now();
  const slo = model.spec.slo;
  if (!slo) throw failure(FAILURE.InvalidInput, `${modelKey(model)} has no spec.slo: there is no goal to measure`);
  const skip = (why: string): BaselineMeasurement => ({
    skipped: why,
    maxConcurrency: 0,
    capped: false,
    probes: [],
    durationMs: Math.round(performance.now() - started),
  });
  if (deps.proxiedEngines) {
    return skip(
      "this worker reaches engines only through the API server's proxy, which the load would go through; run the worker in the cluster to measure",
    );
  }
  const apiKey = model.spec.engine.apiKeySecret ? await apiKeys?.(model).catch(() => undefined) : undefined;
  if (model.spec.engine.apiKeySecret && !apiKey) {
    return skip(keyNotHeld(model));
  }

  // One replica, the same one each attempt while it lives: the first ready pod of the current revision by name.
  const snapshot = await readEngine(deps.cluster, model, slot);
  const pod = snapshot.currentPods
    .filter(isPodReady)
    .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''))[0];
  if (!pod) throw failure(FAILURE.EndpointUnknown, `${modelKey(model)} has no ready engine pod to measure`);
  const podName = pod.metadata?.name ?? '';
  const url = await deps.endpoints(slot ? { ...model, slot } : model, { name: podName, ip: pod.status?.podIP });

  const goal: LatencyGoal = {
    ttftMs: parseDuration(slo.ttft),
    itlMs: parseDuration(slo.itl),
    attainment: slo.attainment,
  };
  const requestTimeoutMs = Math.max(
    REQUEST_TIMEOUT_MIN_MS,
    REQUEST_TIMEOUT_FACTOR * (goal.ttftMs + slo.workload.outputTokens * goal.itlMs),
  );
  const target = {
    url,
    model: model.spec.engine.servedModelName,
    ...(apiKey ? { headers: { authorization: `Bearer ${apiKey}` } } : {}),
    ...(deps.http ? { fetch: deps.http } : {}),
  };
  const signal = Context.current().cancellationSignal;
  const log = Context.current().log;
  // Prompts of the model's own token ids (vLLM's /tokenize); an engine without the route gets the usual ids.
  const tokenIds = await vocabularyIds(target, signal);

  const result = await findMaxConcurrency(
    async (concurrency) => {
      const probed = await probe(target, concurrency, slo.workload, goal, {
        requestTimeoutMs,
        signal,
        ...(tokenIds ? { tokenIds } : {}),
      });
      if (concurrency === 1) refuseUnanswered(model, podName, probed);
      return probed;
    },
    {
      maxConcurrency: slo.maxConcurrency,
      onProbe: (p) => {
        Context.current().heartbeat({ concurrency: p.concurrency, attainment: p.attainment });
        log.info('baseline probe', {
          model: modelKey(model),
          pod: podName,
          concurrency: p.concurrency,
          attainment: p.attainment,
          meets: p.meets,
        });
      },
    },
  );
  const at = result.at;
  const firstError = result.probes.find((p) => p.firstError)?.firstError;
  return {
    maxConcurrency: result.maxConcurrency,
    capped: result.capped,
    ...(at && result.maxConcurrency > 0
      ? {
          ...(at.ttftP95Ms !== undefined ? { ttftP95Ms: Math.round(at.ttftP95Ms) } : {}),
          ...(at.itlP95Ms !== undefined ? { itlP95Ms: Math.round(at.itlP95Ms * 10) / 10 } : {}),
          attainment: Math.round(at.attainment * 1000) / 1000,
        }
      : {}),
    pod: podName,
    probes: result.probes.map((p) => ({
      concurrency: p.concurrency,
      requests: p.requests,
      good: p.good,
      errors: p.errors,
      meets: p.meets,
    })),
    ...(firstError ? { firstError } : {}),
    durationMs: Math.round(performance.now() - started),
  };
}

/**
 * One request at a time that never completed is not a capacity of 0: the engine did not answer (tried again) or
 * refused the measurement's requests (a 4xx: the workload does not fit the engine, and no retry changes that).
 */
function refuseUnanswered(model: ServedModel, pod: string, probed: ProbeResult): void {
  if (probed.requests === 0 || probed.errors < probed.requests) return;
  const error = probed.firstError ?? 'no request completed';
  if (/\bHTTP 4\d\d\b/.test(error) && !/\bHTTP 429\b/.test(error)) {
    throw failure(
      FAILURE.MeasurementRefused,
      `pod ${pod} refused the load measurement's requests (spec.slo.workload: ${model.spec.slo!.workload.promptTokens} prompt and ${model.spec.slo!.workload.outputTokens} output tokens): ${error}`,
    );
  }
  throw failure(FAILURE.EngineUnanswered, `pod ${pod} completed none of the load measurement's requests: ${error}`);
}

const modelKey = (model: ServedModel) => `${model.metadata.namespace}/${model.metadata.name}`;
