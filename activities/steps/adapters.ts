// syncAdapters: makes every ready replica of the current revision hold exactly the LoRA adapters the spec lists.
// vLLM keeps adapters in process memory, so each replica is reached on its own pod (never through the Service,
// which balances across replicas): read what it lists on /v1/models, unload what the spec no longer lists, load what
// is missing from its directory on the volume. Whether the files are there is the adapter Job's business.
import type { V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import type { AdapterReplicas, AdapterSyncResult, ModelInput, ServedModel } from '../../workflows/contract/index.js';
import { adapterDir } from '../builders/index.js';
import { readEngine } from '../cluster/model-reads.js';
import type { ActivityDeps } from '../deps.js';
import { isPodReady } from '../readers/revision.js';
import { keyNotHeld, type ApiKeyResolver } from './health.js';
import { readAnswer } from '../engine-answers.js';

const REQUEST_TIMEOUT_MS = 10_000;
/** Rounds per replica while its engine does not answer (or answers 5xx), before the activity reports it. */
const ROUNDS = 3;
const ROUND_GAP_MS = 500;

type AdapterError = NonNullable<AdapterReplicas['error']>;

/** What one replica holds after its sync, and why it lacks what it lacks. */
interface ReplicaOutcome {
  pod: string;
  loaded: Set<string>;
  errors: Map<string, AdapterError>;
  unloaded: string[];
}

export async function syncAdapters(
  deps: ActivityDeps,
  { model, slot }: ModelInput,
  apiKeys?: ApiKeyResolver,
): Promise<AdapterSyncResult> {
  const desired = new Map((model.spec.engine.lora.adapters ?? []).map((a) => [a.name, adapterDir(a.source)]));
  const snapshot = await readEngine(deps.cluster, model, slot);
  const ready = snapshot.currentPods.filter(isPodReady);
  const apiKey = model.spec.engine.apiKeySecret ? await apiKeys?.(model).catch(() => undefined) : undefined;
  // Each pod reached in its revision's slot (the local stack's per-pod stand-ins are keyed by it).
  const at = slot ? { ...model, slot } : model;
  const outcomes = await Promise.all(ready.map((pod) => syncReplica(deps, at, pod, desired, apiKey)));
  return {
    adapters: [...desired.keys()].map((name) => {
      const missing = outcomes.filter((o) => !o.loaded.has(name));
      const error = missing.map((o) => o.errors.get(name)).find((e) => e !== undefined);
      return {
        name,
        loadedReplicas: outcomes.length - missing.length,
        readyReplicas: outcomes.length,
        ...(error ? { error } : {}),
      };
    }),
    unloaded: outcomes.flatMap((o) => o.unloaded.map((name) => `${name} from ${o.pod}`)),
    incarnations: ready.map(incarnation).sort(),
  };
}

/** `<pod>/<uid8>/<restarts>`: what changes when the engine process on a replica is a new one. */
export function incarnation(pod: V1Pod): string {
  const restarts = (pod.status?.containerStatuses ?? []).reduce((n, c) => n + (c.restartCount ?? 0), 0);
  return `${pod.metadata?.name}/${(pod.metadata?.uid ?? '').slice(0, 8)}/${restarts}`;
}

async function syncReplica(
  deps: ActivityDeps,
  model: ServedModel,
  pod: V1Pod,
  desired: Map<string, string>,
  apiKey: string | undefined,
): Promise<ReplicaOutcome> {
  const name = pod.metadata?.name ?? '';
  const outcome: ReplicaOutcome = { pod: name, loaded: new Set(), errors: new Map(), unloaded: [] };
  const unreachable = (message: string) => {
    for (const adapter of desired.keys()) {
      if (!outcome.loaded.has(adapter)) {
        outcome.errors.set(adapter, {
          reason: 'EngineUnreachable',
          message: `pod ${name}: ${message}`,
          permanent: false,
        });
      }
    }
  };
  let base: string;
  try {
    base = await deps.endpoints(model, { name, ip: pod.status?.podIP });
  } catch (err) {
    unreachable(text(err));
    return outcome;
  }
  const http = deps.http ?? fetch;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const call = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
    const res = await http(`${base}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      redirect: 'manual',
    });
    // Past the bound the call fails (AnswerTooLarge), as an unreachable engine's does.
    return { status: res.status, body: await readAnswer(res) };
  };

  for (let round = 1; round <= ROUNDS; round++) {
    if (round > 1) await sleep(ROUND_GAP_MS * 2 ** (round - 2));
    Context.current().heartbeat();
    outcome.errors.clear();
    let listed: Map<string, string>;
    try {
      const res = await call('GET', '/v1/models');
      if (res.status === 401) {
        refuseAll(outcome, desired, `pod ${name}: ${needsKey(model, apiKey)}`);
        return outcome;
      }
      if (res.status !== 200) {
        unreachable(`/v1/models answered ${res.status}${res.body ? `: ${clip(res.body)}` : ''}`);
        continue;
      }
      listed = adaptersListed(res.body);
    } catch (err) {
      unreachable(text(err));
      continue;
    }
    outcome.loaded = new Set([...listed].filter(([adapter, path]) => desired.get(adapter) === path).map(([a]) => a));

    // What the spec no longer lists (or lists from another source) goes first: a name is then free for its new files.
    let transient = false;
    for (const [adapter, path] of listed) {
      if (desired.get(adapter) === path) continue;
      const res = await call('POST', '/v1/unload_lora_adapter', { lora_name: adapter }).catch((err: unknown) => ({
        status: 0,
        body: text(err),
      }));
      if (res.status === 200 || res.status === 404) {
        if (!desired.has(adapter)) outcome.unloaded.push(adapter);
      } else {
        transient = true;
        if (desired.has(adapter)) outcome.errors.set(adapter, unloadError(name, adapter, res));
      }
    }
    for (const [adapter, path] of desired) {
      if (outcome.loaded.has(adapter) || outcome.errors.has(adapter)) continue;
      const res = await call('POST', '/v1/load_lora_adapter', { lora_name: adapter, lora_path: path }).catch(
        (err: unknown) => ({ status: 0, body: text(err) }),
      );
      if (res.status === 200 || (res.status === 400 && /already been loaded/.test(res.body))) {
        outcome.loaded.add(adapter);
        continue;
      }
      const error = loadError(name, model, apiKey, res);
      outcome.errors.set(adapter, error);
      if (!error.permanent) transient = true;
    }
    if (!transient) return outcome;
  }
  return outcome;
}

/** The adapters a replica lists on /v1/models (cards with a `parent`), name → path. */
function adaptersListed(body: string): Map<string, string> {
  const cards = (JSON.parse(body) as { data?: { id?: string; root?: string; parent?: string | null }[] }).data ?? [];
  return new Map(cards.filter((c) => c.parent && c.id).map((c) => [c.id!, c.root ?? '']));
}

function loadError(
  pod: string,
  model: ServedModel,
  apiKey: string | undefined,
  res: { status: number; body: string },
): AdapterError {
  // vLLM 0.32 answers an adapter it cannot load (a rank above --max-lora-rank, a broken adapter_config.json, a path
  // that is a file) with 500 "Call to add_lora method failed: Worker failed with error '…'": the adapter's fault,
  // which no retry fixes, unlike an engine that is down (no answer, or another 5xx).
  if (res.status === 500 && /Call to add_lora method failed/.test(res.body)) {
    return { reason: 'AdapterRefused', message: `pod ${pod}: ${engineWords(res)}`, permanent: true };
  }
  if (res.status === 0 || res.status >= 500) {
    return { reason: 'EngineUnreachable', message: `pod ${pod}: ${engineWords(res)}`, permanent: false };
  }
  if (res.status === 401)
    return { reason: 'AdapterRefused', message: `pod ${pod}: ${needsKey(model, apiKey)}`, permanent: true };
  if (res.status === 404 && /"detail"\s*:\s*"Not Found"/.test(res.body)) {
    return {
      reason: 'AdapterRefused',
      message: `pod ${pod}: the engine has no /v1/load_lora_adapter (runtime LoRA updating is off: is engine.lora.enabled true in the spec it runs?)`,
      permanent: true,
    };
  }
  return { reason: 'AdapterRefused', message: `pod ${pod}: ${engineWords(res)}`, permanent: true };
}

function unloadError(pod: string, adapter: string, res: { status: number; body: string }): AdapterError {
  return {
    reason: 'EngineUnreachable',
    message: `pod ${pod}: unloading the old ${adapter} failed: ${engineWords(res)}`,
    permanent: false,
  };
}

function refuseAll(outcome: ReplicaOutcome, desired: Map<string, string>, message: string): void {
  for (const adapter of desired.keys())
    outcome.errors.set(adapter, { reason: 'AdapterRefused', message, permanent: true });
}

const needsKey = (model: ServedModel, apiKey: string | undefined): string =>
  apiKey ? 'the engine refused the API key from engine.apiKeySecret (401)' : keyNotHeld(model);

/** vLLM's own message (`{"error": {"message"}}`), else the status and the start of the body. */
function engineWords(res: { status: number; body: string }): string {
  if (res.status === 0) return res.body;
  try {
    const message = (JSON.parse(res.body) as { error?: { message?: string } }).error?.message;
    if (message) return `${message} (HTTP ${res.status})`;
  } catch {
    // Not JSON: the body as it is.
  }
  return `HTTP ${res.status}${res.body ? `: ${clip(res.body)}` : ''}`;
}

const clip = (s: string): string => (s.length > 300 ? `${s.slice(0, 300)}…` : s);

function text(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause ? `${err.message} (${cause.code ?? cause.message ?? 'unknown cause'})` : err.message;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
