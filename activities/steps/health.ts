// Whether a model's engine answers: GET /health is 200 and GET /v1/models lists the served model name. awaitHealth
// polls that for the whole startup budget in one heartbeating activity, and only once a replica of the current
// revision is ready, so an old revision's replica never makes a spec change look Ready.
import { Context } from '@temporalio/activity';
import {
  FAILURE,
  failure,
  type HealthResult,
  type ModelInput,
  parseDuration,
  type ServedModel,
  type Slot,
} from '../../workflows/contract/index.js';
import { clientEndpoint, timingOf, type ActivityDeps } from '../deps.js';
import { fatalProblems, podFailure } from './engine-failure.js';
import { waitFor } from '../cluster/wait.js';
import { ProblemConfirmer } from '../readers/problem-confirmer.js';
import { HEALTH_PATH } from '../builders/index.js';
import { AnswerTooLarge, readAnswer } from '../engine-answers.js';
import { assertOurs } from '../readers/ownership.js';
import { ProgressReporter } from '../cluster/progress.js';
import { isPodReady, podsState } from '../readers/revision.js';
import { currentPodProblems, engineWatches, readEngine } from '../cluster/model-reads.js';

/** The model's API key, when the worker holds it (it usually does not); never logged, never returned. */
export type ApiKeyResolver = (model: ServedModel) => Promise<string | undefined>;

/** One HTTP look at an engine. */
export type EngineProbe =
  | { ready: true; endpoint: string; engineEndpoint?: string; models: string[]; note?: string }
  | { ready: false; endpoint?: string; state: string; message: string };

const REQUEST_TIMEOUT_MS = 5_000;
/** The pause between HTTP checks once a replica is ready, for PROBE_FAST_MS; then it doubles up to pollMs. */
const FIRST_PROBE_GAP_MS = 100;
const PROBE_FAST_MS = 3_000;
const MODELS_PATH = '/v1/models';

/**
 * GET /health, then GET /v1/models with the API key as a bearer token when the worker has it. A 401 on /v1/models
 * of a model with `apiKeySecret`, without the key, means "auth required": /health 200 is then enough, said in `note`.
 */
export async function probeEngine(
  deps: Pick<ActivityDeps, 'endpoints' | 'http'>,
  model: ServedModel,
  opts: { signal?: AbortSignal; apiKey?: string; timeoutMs?: number; slot?: Slot } = {},
): Promise<EngineProbe> {
  let endpoint: string;
  try {
    endpoint = await deps.endpoints(opts.slot ? { ...model, slot: opts.slot } : model);
  } catch (err) {
    return { ready: false, state: 'EndpointUnknown', message: errorText(err) };
  }
  // What status shows: with a front, the model's Service (the front), not the engine's own that was probed.
  const shown = model.spec.front ? await clientEndpoint(deps.endpoints, model).catch(() => endpoint) : endpoint;
  const own = shown === endpoint ? {} : { engineEndpoint: endpoint };
  const http = deps.http ?? fetch;
  type NotReady = Extract<EngineProbe, { ready: false }>;
  /** The answer to GET `path`, or why the engine is not ready when there is none. */
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const signals = [AbortSignal.timeout(opts.timeoutMs ?? REQUEST_TIMEOUT_MS)];
    if (opts.signal) signals.push(opts.signal);
    try {
      const res = await http(`${endpoint}${path}`, { headers, signal: AbortSignal.any(signals), redirect: 'manual' });
      const text = await readAnswer(res).catch((err: unknown) => {
        if (err instanceof AnswerTooLarge) throw err;
        return '';
      });
      return { status: res.status, text };
    } catch (err) {
      if (err instanceof AnswerTooLarge) {
        const large: NotReady = {
          ready: false,
          endpoint: shown,
          state: 'Unhealthy',
          message: `GET ${path}: ${err.message}`,
        };
        return large;
      }
      const failed: NotReady = {
        ready: false,
        endpoint: shown,
        state: 'Unreachable',
        message: `GET ${endpoint}${path} failed: ${errorText(err)}`,
      };
      return failed;
    }
  };
  /** 503 is vLLM loading the model; any other status but 200 is not serving. */
  const notServing = (path: string, status: number): NotReady | undefined => {
    if (status === 503) {
      return {
        ready: false,
        endpoint: shown,
        state: 'Loading',
        message: `GET ${path} answers 503: the engine is loading the model`,
      };
    }
    if (status !== 200)
      return { ready: false, endpoint: shown, state: 'Unhealthy', message: `GET ${path} answers ${status}` };
    return undefined;
  };

  const health = await get(HEALTH_PATH);
  if ('ready' in health) return health;
  const unhealthy = notServing(HEALTH_PATH, health.status);
  if (unhealthy) return unhealthy;

  const list = await get(MODELS_PATH, opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {});
  if ('ready' in list) return list;
  const served = model.spec.engine.servedModelName;
  if (list.status === 401 && !opts.apiKey && model.spec.engine.apiKeySecret) {
    return {
      ready: true,
      ...own,
      endpoint: shown,
      models: [],
      note: `${MODELS_PATH} requires the API key (engine.apiKeySecret), which this worker does not hold: readiness rests on ${HEALTH_PATH} alone`,
    };
  }
  if (list.status === 401) {
    return {
      ready: false,
      endpoint: shown,
      state: 'Unauthorized',
      message: opts.apiKey
        ? `${MODELS_PATH} refused the API key from engine.apiKeySecret (401)`
        : `${MODELS_PATH} requires an API key (401) but the model sets no engine.apiKeySecret`,
    };
  }
  const notListing = notServing(MODELS_PATH, list.status);
  if (notListing) return notListing;
  const models = modelIds(list.text);
  if (!models) {
    return {
      ready: false,
      endpoint: shown,
      state: 'Unhealthy',
      message: `GET ${MODELS_PATH} did not answer a model list`,
    };
  }
  if (!models.includes(served)) {
    return {
      ready: false,
      endpoint: shown,
      state: 'ModelNotListed',
      message: `${MODELS_PATH} lists ${models.length ? listed(models) : 'no model'}, not the served model name ${served}`,
    };
  }
  return { ready: true, endpoint: shown, ...own, models };
}

/** The first few names of a list an engine gave, and how many more. */
function listed(names: string[], shown = 10): string {
  const more = names.length - shown;
  return names.slice(0, shown).join(', ') + (more > 0 ? ` and ${more} more` : '');
}

function modelIds(text: string): string[] | undefined {
  try {
    const body = JSON.parse(text) as { data?: unknown };
    if (!Array.isArray(body.data)) return undefined;
    return body.data
      .map((card: unknown) => (card && typeof card === 'object' ? (card as { id?: unknown }).id : undefined))
      .filter((id): id is string => typeof id === 'string');
  } catch {
    return undefined;
  }
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (err.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  return cause ? `${err.message} (${cause.code ?? cause.message ?? 'unknown cause'})` : err.message;
}

/**
 * Polls until a replica of the current revision is ready and the engine answers (see `probeEngine`). The deadline
 * is the first attempt's schedule time plus `engine.startupTimeout`, so retries keep the budget instead of
 * renewing it; past it, a non-retryable `StartupTimeout` says what was last seen.
 */
export async function awaitHealth(
  deps: ActivityDeps,
  { model, slot }: ModelInput,
  apiKeys?: ApiKeyResolver,
): Promise<HealthResult> {
  const ctx = Context.current();
  const timing = timingOf(deps);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const confirmer = new ProblemConfirmer(timing.pollMs);
  const ns = model.metadata.namespace;
  const budget = model.spec.engine.startupTimeout;
  // scheduledTimestampMs is when the FIRST attempt was scheduled (currentAttemptScheduledTimestampMs is this one's).
  const deadline = ctx.info.scheduledTimestampMs + parseDuration(budget);
  if (model.spec.replicas === 0) {
    throw failure(FAILURE.NoReplicas, `model ${ns}/${model.metadata.name} has 0 replicas: there is no engine to check`);
  }
  const apiKey = model.spec.engine.apiKeySecret ? await apiKeys?.(model).catch(() => undefined) : undefined;
  let last: { state: string; message: string } = { state: 'Pending', message: 'the engine was not looked at yet' };
  const watch = {
    signal: ctx.cancellationSignal,
    pollMs: timing.pollMs,
    watches: engineWatches(model, slot),
    deadline,
  };
  // No watch tells when the engine starts answering: from the first ready replica on, the engine is probed over HTTP
  // every 100 ms for PROBE_FAST_MS, then backing off to pollMs, and the cluster is read again only when a watch
  // says it changed or a poll interval has passed (an instant engine answers a moment after its pod is ready).
  let probing: { since: number; gapMs: number; readAt: number; readyReplicas: number } | undefined;

  const result = await waitFor(deps.cluster, {
    ...watch,
    nextTickMs: () => probing?.gapMs ?? timing.pollMs,
    check: async (trigger): Promise<HealthResult | undefined> => {
      const now = Date.now();
      const reread = !probing || trigger !== 'tick' || now - probing.readAt >= timing.pollMs;
      let readyReplicas = probing?.readyReplicas ?? 0;
      if (reread) {
        const snapshot = await readEngine(deps.cluster, model, slot);
        const deployment = assertOurs(model, snapshot.deployment);
        readyReplicas = snapshot.currentPods.filter(isPodReady).length;
        if (!deployment) {
          last = { state: 'EngineMissing', message: `Deployment ${ns}/${model.metadata.name} does not exist` };
          readyReplicas = 0;
        } else {
          const problems = await currentPodProblems(deps.cluster, snapshot);
          const fatal = confirmer.confirmed(fatalProblems(problems));
          if (fatal) throw await podFailure(deps.cluster, ns, fatal);
          if (readyReplicas === 0) {
            const top = problems[0];
            last = top
              ? { state: top.reason, message: top.message }
              : {
                  state: 'WaitingForReplica',
                  message: `no replica of the current revision is ready yet (${podsState(snapshot)})`,
                };
          }
        }
        if (readyReplicas === 0) probing = undefined;
        else probing = { since: now, gapMs: FIRST_PROBE_GAP_MS, ...probing, readAt: now, readyReplicas };
      }
      if (probing) {
        const probe = await probeEngine(deps, model, {
          signal: ctx.cancellationSignal,
          apiKey,
          ...(slot ? { slot } : {}),
        });
        if (probe.ready) {
          const { ready: _ready, ...found } = probe;
          return found;
        }
        if (now - probing.since >= PROBE_FAST_MS) probing.gapMs = Math.min(probing.gapMs * 2, timing.pollMs);
        last = { state: probe.state, message: probe.message };
      }
      await reporter.report({ step: 'startup', state: last.state, message: last.message, readyReplicas });
      return undefined;
    },
  });
  if (result) return result;
  throw failure(
    FAILURE.StartupTimeout,
    `the engine did not become ready within engine.startupTimeout (${budget}); last seen: ${last.state}: ${last.message}`,
    { lastState: last.state, lastMessage: last.message },
  );
}

/** Why a keyed model's engine refuses this worker, and what lets it in. */
export function keyNotHeld(model: ServedModel): string {
  const name = model.spec.engine.apiKeySecret?.name ?? '';
  return `the engine needs its API key and this worker could not read it from Secret ${name} in namespace ${model.metadata.namespace} (engine.apiKeySecret): let the worker's Role get it (the chart's apiKeySecrets value: {${model.metadata.namespace}: [${name}]})`;
}

/**
 * Reads the API key from the model's `engine.apiKeySecret`, for a worker whose Role may `get` that Secret; any other
 * worker gets undefined (and awaitHealth settles for /health). Opt-in: pass it to `createActivities`.
 */
export function apiKeyFromSecret(deps: Pick<ActivityDeps, 'cluster'>): ApiKeyResolver {
  return async (model) => {
    const ref = model.spec.engine.apiKeySecret;
    if (!ref) return undefined;
    const secret = await deps.cluster
      .get<{ apiVersion: string; kind: string; data?: Record<string, string> }>({
        apiVersion: 'v1',
        kind: 'Secret',
        name: ref.name,
        namespace: model.metadata.namespace,
      })
      .catch(() => undefined);
    const value = secret?.data?.[ref.key];
    return value ? Buffer.from(value, 'base64').toString('utf8').trim() || undefined : undefined;
  };
}
