// The stand-in for vLLM's OpenAI-compatible API server: lifecycle (loading -> ready -> optionally failed), auth,
// routing, /v1/models and runtime LoRA (model-routes.ts). Ferry runs it where no GPU or real engine exists; see
// README.md.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { serveChatCompletion, serveCompletion, type GenerationContext } from './completions.js';
import { OpenAiHttpError, readJsonObject, sendDetail, sendJson, sendOpenAiError, sendText } from './http-io.js';
import { EngineMetrics, type EngineMetricsView } from './metrics.js';
import { modelRoutes, vocabularySize } from './model-routes.js';
import { Scheduler } from './scheduler.js';

/** The vLLM release the stand-in is checked against (test/real-engine/conformance.test.ts), marked as a stand-in. */
const SIM_VERSION = '0.32.0+ferry-sim';
/** Paths vLLM's API key guards; everything else (/health, /metrics, /version, /tokenize…) is open. */
const GUARDED_PREFIXES = ['/v1', '/v2', '/inference', '/cohere'];
const DEFAULT_MODEL = 'Qwen/Qwen3-0.6B';
// vLLM binds every interface by default; the stand-in binds loopback unless told otherwise, as it guards nothing.
const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_PORT = 8000;
const DEFAULT_MAX_MODEL_LEN = 4096;
export const DEFAULT_LOAD_DELAY_SECONDS = 2;
/** vLLM's default `--max-num-seqs`. */
const DEFAULT_MAX_NUM_SEQS = 256;

export interface LoraModule {
  readonly name: string;
  readonly path: string;
}

export interface EngineSimOptions {
  /** `--model`: the weights path; reported as `root` in /v1/models. */
  readonly model?: string;
  /** `--served-model-name`: names clients may use; the first is the one vLLM reports back. Defaults to `[model]`. */
  readonly servedModelNames?: readonly string[];
  readonly host?: string;
  /** 0 picks a free port; `start()` reports the one chosen. */
  readonly port?: number;
  readonly maxModelLen?: number;
  readonly enableLora?: boolean;
  /** Accepted and reported in state for fidelity; vLLM caps adapters per batch, not adapters loaded. */
  readonly maxLoras?: number;
  /** `--max-lora-rank` (vLLM's default 16): an adapter of a higher rank (`r` in its adapter_config.json) is refused. */
  readonly maxLoraRank?: number;
  /** `--lora-modules`: adapters present from the start (requires `enableLora`). */
  readonly loraModules?: readonly LoraModule[];
  /** vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING: registers /v1/load_lora_adapter and /v1/unload_lora_adapter. */
  readonly allowRuntimeLoraUpdating?: boolean;
  /** vLLM's --api-key / VLLM_API_KEY: when set, /v1/* (and vLLM's other guarded prefixes) need `Bearer <key>`. */
  readonly apiKey?: string;
  /** Seconds after listening during which the "model is loading": /health 503, everything else 503. */
  readonly loadDelaySeconds?: number;
  /** Seconds after becoming healthy at which the engine "fails": /health 500, generation 500. */
  readonly failAfterSeconds?: number;
  /** `--max-num-seqs`: requests (sequences) running at once; the rest wait in FIFO order. Default 256, as in vLLM. */
  readonly maxNumSeqs?: number;
  /** Simulated decode step time with one request running: the time between its tokens. */
  readonly tokenDelayMs?: number;
  /** What each further running request adds to a decode step: step(r) = tokenDelayMs + batchStepMs × (r − 1). */
  readonly batchStepMs?: number;
  /** Simulated prefill time per prompt token, spent before a request's first decode step. */
  readonly prefillMsPerToken?: number;
  /**
   * A directory standing for the engine's volume, mounted at `/models`: when set, a LoRA load whose `lora_path` has no
   * `adapter_config.json` there is refused as vLLM refuses it (404), and the model's `config.json` there (when `model`
   * is under `/models`) gives the vocabulary size token ids are checked against. Unset: nothing is read.
   */
  readonly modelsDir?: string;
}

type EnginePhase = 'idle' | 'loading' | 'ready' | 'failed' | 'stopped';

interface EngineSimState {
  readonly phase: EnginePhase;
  readonly port: number | undefined;
  readonly host: string;
  readonly servedModelNames: readonly string[];
  readonly maxLoras: number;
  /** Requests that may run at once (`--max-num-seqs`); beyond it they queue. */
  readonly maxNumSeqs: number;
  /** LoRA name -> path, static and runtime-loaded alike. */
  readonly loraAdapters: ReadonlyMap<string, string>;
  readonly metrics: EngineMetricsView;
}

export interface EngineSim {
  readonly server: Server;
  readonly state: EngineSimState;
  start(): Promise<{ port: number; host: string }>;
  stop(): Promise<void>;
}

interface Route {
  readonly method: 'GET' | 'POST' | readonly ('GET' | 'POST')[];
  run(req: IncomingMessage, res: ServerResponse): Promise<void> | void;
}

export function createEngineSim(options: EngineSimOptions = {}): EngineSim {
  const model = options.model ?? DEFAULT_MODEL;
  const servedModelNames = options.servedModelNames?.length ? [...options.servedModelNames] : [model];
  const baseName = servedModelNames[0] ?? model;
  const host = options.host ?? DEFAULT_HOST;
  const port = options.port ?? DEFAULT_PORT;
  const maxModelLen = positive('maxModelLen', options.maxModelLen ?? DEFAULT_MAX_MODEL_LEN);
  const enableLora = options.enableLora ?? false;
  const maxLoras = positive('maxLoras', options.maxLoras ?? 1);
  const loadDelayMs = nonNegative('loadDelaySeconds', options.loadDelaySeconds ?? DEFAULT_LOAD_DELAY_SECONDS) * 1000;
  const failAfterMs =
    options.failAfterSeconds === undefined
      ? undefined
      : nonNegative('failAfterSeconds', options.failAfterSeconds) * 1000;
  const maxNumSeqs = positive('maxNumSeqs', options.maxNumSeqs ?? DEFAULT_MAX_NUM_SEQS);
  const scheduler = new Scheduler({
    maxNumSeqs,
    tokenDelayMs: nonNegative('tokenDelayMs', options.tokenDelayMs ?? 0),
    batchStepMs: nonNegative('batchStepMs', options.batchStepMs ?? 0),
    prefillMsPerToken: nonNegative('prefillMsPerToken', options.prefillMsPerToken ?? 0),
    // A cache that holds every sequence at full length: usage grows with the batch and never refuses one.
    kvCacheTokens: maxNumSeqs * maxModelLen,
  });
  if (options.loraModules?.length && !enableLora) {
    throw new Error('engine-sim: loraModules need enableLora, as vLLM refuses --lora-modules without --enable-lora');
  }

  const loras = new Map<string, string>((options.loraModules ?? []).map((lora) => [lora.name, lora.path]));
  const metrics = new EngineMetrics(scheduler, enableLora ? maxLoras : undefined);
  // Hash both sides so the comparison is constant-time whatever the token's length, as vLLM does.
  const keyHashes = options.apiKey ? [sha256(options.apiKey)] : [];
  const vocabSize = options.modelsDir === undefined ? undefined : vocabularySize(options.modelsDir, model);
  const systemFingerprint = `vllm-${SIM_VERSION}-${sha256(
    JSON.stringify({ model, servedModelNames, maxModelLen, enableLora, maxLoras, maxNumSeqs }),
  )
    .toString('hex')
    .slice(0, 8)}`;
  let listeningAt: number | undefined;
  let stopped = false;

  const phase = (): EnginePhase => {
    if (stopped) return 'stopped';
    if (listeningAt === undefined) return 'idle';
    const elapsed = performance.now() - listeningAt;
    if (elapsed < loadDelayMs) return 'loading';
    if (failAfterMs !== undefined && elapsed >= loadDelayMs + failAfterMs) return 'failed';
    return 'ready';
  };

  const resolveModel: GenerationContext['resolveModel'] = (requested) => {
    // vLLM lets clients omit `model`, and answers under the first served name for any base-model alias.
    if (!requested || servedModelNames.includes(requested)) return { name: baseName };
    return loras.has(requested) ? { name: requested, lora: requested } : undefined;
  };
  const generation: GenerationContext = {
    resolveModel,
    servedModelNames,
    maxModelLen,
    vocabSize,
    systemFingerprint,
    scheduler,
    metrics,
  };

  const failIfDead = () => {
    if (phase() === 'failed') {
      // vLLM 0.32's words once its EngineCore process has died (its API server then exits; the stand-in stays up).
      throw new OpenAiHttpError(
        500,
        'InternalServerError',
        'EngineCore encountered an issue. See stack trace (above) for the root cause.',
      );
    }
  };
  const { modelList, loadLora, unloadLora, tokenize } = modelRoutes({
    model,
    servedModelNames,
    baseName,
    maxModelLen,
    enableLora,
    loras,
    vocabSize,
    resolveModel,
    options,
  });

  const emptyOk: Route['run'] = (_req, res) => {
    res.writeHead(200, { 'content-length': '0' });
    res.end();
  };
  const routes = new Map<string, Route>([
    ['/version', { method: 'GET', run: (_req, res) => sendJson(res, 200, { version: SIM_VERSION }) }],
    // SageMaker's health route, which vLLM serves too (GET and POST), like /health once ready.
    ['/ping', { method: ['GET', 'POST'], run: emptyOk }],
    ['/tokenize', { method: 'POST', run: tokenize }],
    [
      '/metrics',
      {
        method: 'GET',
        // vLLM 0.32 answers GET /metrics with prometheus_client's latest text format (the same text as 0.0.4).
        run: (_req, res) => sendText(res, 200, metrics.render(baseName), 'text/plain; version=1.0.0; charset=utf-8'),
      },
    ],
    ['/v1/models', { method: 'GET', run: (_req, res) => sendJson(res, 200, modelList()) }],
    [
      '/v1/completions',
      {
        method: 'POST',
        run: async (req, res) => {
          const body = await readJsonObject(req);
          failIfDead();
          await serveCompletion(req, res, body, generation);
        },
      },
    ],
    [
      '/v1/chat/completions',
      {
        method: 'POST',
        run: async (req, res) => {
          const body = await readJsonObject(req);
          failIfDead();
          await serveChatCompletion(req, res, body, generation);
        },
      },
    ],
  ]);
  // vLLM only registers these routes when runtime updating is allowed, so otherwise they are plain 404s.
  if (options.allowRuntimeLoraUpdating) {
    routes.set('/v1/load_lora_adapter', { method: 'POST', run: loadLora });
    routes.set('/v1/unload_lora_adapter', { method: 'POST', run: unloadLora });
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    // Split rather than URL-parse: a request target like `//x/health` must not be read as a host.
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const method = req.method ?? 'GET';
    if (path === '/health') {
      if (method !== 'GET') return sendDetail(res, 405, 'Method Not Allowed', { allow: 'GET' });
      const current = phase();
      // vLLM answers 503 both while loading and once its engine has died; probes see an unhealthy pod either way.
      const status = current === 'ready' ? 200 : 503;
      res.writeHead(status, { 'content-length': '0' });
      return res.end();
    }
    if (phase() === 'loading' && listeningAt !== undefined) {
      // Real vLLM serves nothing until the weights are in memory; callers must wait for /health.
      const remaining = Math.max(1, Math.ceil((loadDelayMs - (performance.now() - listeningAt)) / 1000));
      throw new OpenAiHttpError(
        503,
        'ServiceUnavailableError',
        'The model is still loading. Retry once /health returns 200.',
        { headers: { 'retry-after': String(remaining) } },
      );
    }
    const guarded = GUARDED_PREFIXES.some((prefix) => path.startsWith(prefix));
    // vLLM lets OPTIONS (CORS preflights) through unauthenticated.
    if (keyHashes.length > 0 && guarded && method !== 'OPTIONS' && !authorized(req.headers.authorization, keyHashes)) {
      return sendJson(res, 401, { error: 'Unauthorized' });
    }
    const route = routes.get(path);
    if (!route) return sendDetail(res, 404, 'Not Found');
    const allowed: readonly string[] = typeof route.method === 'string' ? [route.method] : route.method;
    if (!allowed.includes(method)) return sendDetail(res, 405, 'Method Not Allowed', { allow: allowed.join(', ') });
    await route.run(req, res);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const error =
        err instanceof OpenAiHttpError
          ? err
          : new OpenAiHttpError(500, 'InternalServerError', `engine-sim: ${(err as Error)?.message ?? String(err)}`);
      sendOpenAiError(res, error);
    });
  });

  const state: EngineSimState = {
    get phase() {
      return phase();
    },
    get port() {
      const address = server.address();
      return address && typeof address === 'object' ? address.port : undefined;
    },
    host,
    servedModelNames,
    maxLoras,
    maxNumSeqs,
    loraAdapters: loras,
    metrics,
  };

  return {
    server,
    state,
    start() {
      if (listeningAt !== undefined || stopped) return Promise.reject(new Error('engine-sim: already started'));
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          listeningAt = performance.now();
          resolve({ port: (server.address() as AddressInfo).port, host });
        });
      });
    },
    stop() {
      stopped = true;
      if (!server.listening) return Promise.resolve();
      return new Promise((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Keep-alive sockets (fetch keeps them) and open streams would otherwise hold close() open.
        server.closeAllConnections();
      });
    },
  };
}

/** vLLM's check: the scheme `bearer` in any case, then the token (after the first space) against every key. */
function authorized(header: string | undefined, keyHashes: readonly Buffer[]): boolean {
  if (!header) return false;
  const space = header.indexOf(' ');
  const scheme = space === -1 ? header : header.slice(0, space);
  if (scheme.toLowerCase() !== 'bearer') return false;
  const token = sha256(space === -1 ? '' : header.slice(space + 1));
  let match = false;
  for (const key of keyHashes) match = timingSafeEqual(token, key) || match;
  return match;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new Error(`engine-sim: ${name} must be a positive integer`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new Error(`engine-sim: ${name} must be a non-negative number`);
  return value;
}
