// The stand-in for vLLM's OpenAI-compatible API server: lifecycle (loading -> ready -> optionally failed), auth,
// routing, /v1/models and runtime LoRA. Ferry runs it where no GPU or real engine exists; see README.md.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, posix } from 'node:path';
import { performance } from 'node:perf_hooks';
import { serveChatCompletion, serveCompletion, unknownModel, type GenerationContext } from './completions.js';
import { OpenAiHttpError, readJsonObject, sendDetail, sendJson, sendOpenAiError, sendText } from './http-io.js';
import { EngineMetrics, type EngineMetricsView } from './metrics.js';
import { RequestFields } from './request-fields.js';
import { Scheduler } from './scheduler.js';
import { countTokens, tokenIds } from './synthetic-text.js';

/** The vLLM release the stand-in is checked against (test/real-engine/conformance.test.ts), marked as a stand-in. */
const SIM_VERSION = '0.32.0+ferry-sim';
/** Paths vLLM's API key guards; everything else (/health, /metrics, /version, /tokenize…) is open. */
const GUARDED_PREFIXES = ['/v1', '/v2', '/inference', '/cohere'];
/** Token ids /tokenize hands out when the model's vocabulary size is unknown (no --models-dir). */
const DEFAULT_VOCAB_SIZE = 32_000;
const DEFAULT_MODEL = 'Qwen/Qwen3-0.6B';
// vLLM binds every interface by default; the stand-in binds loopback unless told otherwise, as it guards nothing.
const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_PORT = 8000;
const DEFAULT_MAX_MODEL_LEN = 4096;
export const DEFAULT_LOAD_DELAY_SECONDS = 2;
/** vLLM's default `--max-num-seqs`. */
const DEFAULT_MAX_NUM_SEQS = 256;
/** Where the engine's pod mounts the model's volume. */
const MODELS_MOUNT = '/models';

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

  function modelList() {
    const created = Math.floor(Date.now() / 1000);
    const card = (id: string, root: string, parent: string | null, contextLength: number | null) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root,
      parent,
      max_model_len: contextLength,
      permission: [
        {
          id: `modelperm-${randomBytes(8).toString('hex')}`,
          object: 'model_permission',
          created,
          allow_create_engine: false,
          allow_sampling: true,
          allow_logprobs: true,
          allow_search_indices: false,
          allow_view: true,
          allow_fine_tuning: false,
          organization: '*',
          group: null,
          is_blocking: false,
        },
      ],
    });
    return {
      object: 'list',
      data: [
        ...servedModelNames.map((name) => card(name, model, null, maxModelLen)),
        ...[...loras].map(([name, path]) => card(name, path, baseName, null)),
      ],
    };
  }

  /** vLLM 0.32's checks in its order; a success answers with text and no content type, as vLLM's bare Response. */
  async function loadLora(req: IncomingMessage, res: ServerResponse) {
    const fields = new RequestFields(await readJsonObject(req));
    const name = fields.requiredStr('lora_name');
    const path = fields.requiredStr('lora_path');
    const inPlace = fields.bool('load_inplace') ?? false;
    fields.bool('is_3d_lora_weight');
    fields.throwIfInvalid();
    if (!name || !path) {
      throw new OpenAiHttpError(400, 'InvalidUserInput', "Both 'lora_name' and 'lora_path' must be provided.");
    }
    if (servedModelNames.includes(name)) {
      throw new OpenAiHttpError(
        400,
        'InvalidUserInput',
        `The lora adapter '${name}' conflicts with a served base model.`,
      );
    }
    if (!inPlace && loras.has(name)) {
      throw new OpenAiHttpError(
        400,
        'InvalidUserInput',
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set ` +
          "'load_inplace' to True.",
      );
    }
    if (!enableLora) {
      // vLLM's engine refuses it from its worker, which the API server reports as its own failure.
      throw new OpenAiHttpError(
        500,
        'InternalServerError',
        "Call to add_lora method failed: Worker failed with error 'LoRA is not enabled. Use --enable-lora to " +
          "enable LoRA.', please check the stack trace above for the root cause",
      );
    }
    if (options.modelsDir !== undefined && !adapterFilesThere(options.modelsDir, path)) {
      throw new OpenAiHttpError(404, 'NotFoundError', `Loading lora ${name} failed: No adapter found for ${path}`);
    }
    const rank = options.modelsDir !== undefined ? adapterRank(options.modelsDir, path) : undefined;
    const maxRank = options.maxLoraRank ?? 16;
    if (rank !== undefined && rank > maxRank) {
      // As vLLM 0.32 refuses it: from its worker, reported by the API server as its own failure.
      throw new OpenAiHttpError(
        500,
        'InternalServerError',
        `Call to add_lora method failed: Worker failed with error 'LoRA rank ${rank} is greater than max_lora_rank ${maxRank}.', please check the stack trace above for the root cause`,
      );
    }
    // The path is recorded, never read: there are no weights to load.
    loras.set(name, path);
    sendText(res, 200, `Success: LoRA adapter '${name}' added successfully.`, null);
  }

  async function unloadLora(req: IncomingMessage, res: ServerResponse) {
    const fields = new RequestFields(await readJsonObject(req));
    const name = fields.requiredStr('lora_name');
    fields.int('lora_int_id');
    fields.throwIfInvalid();
    if (!name) {
      throw new OpenAiHttpError(400, 'InvalidUserInput', "'lora_name' needs to be provided to unload a LoRA adapter.");
    }
    if (!loras.delete(name)) {
      throw new OpenAiHttpError(404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`);
    }
    sendText(res, 200, `Success: LoRA adapter '${name}' removed successfully.`, null);
  }

  /**
   * vLLM's /tokenize (open without the API key; Ferry's baseline reads it for ids the model has): a prompt or chat
   * messages, counted in whitespace words, each word a stable id in the vocabulary.
   */
  async function tokenize(req: IncomingMessage, res: ServerResponse) {
    const fields = new RequestFields(await readJsonObject(req));
    const requested = fields.str('model');
    const { prompt, messages } = fields.body;
    if (prompt === undefined && messages === undefined) {
      for (const key of ['prompt', 'messages']) {
        fields.invalid({ type: 'missing', loc: [key], msg: 'Field required', input: fields.body });
      }
    }
    const returnStrs = fields.bool('return_token_strs') ?? false;
    fields.bool('add_special_tokens');
    const text =
      typeof prompt === 'string'
        ? prompt
        : Array.isArray(messages)
          ? messages
              .map((m) => (m as { content?: unknown } | null)?.content)
              .filter((c) => typeof c === 'string')
              .join(' ')
          : fields.str('prompt');
    fields.throwIfInvalid();
    if (resolveModel(requested) === undefined) throw unknownModel(requested, servedModelNames);
    const words = text ?? '';
    const tokens = tokenIds(words, vocabSize ?? DEFAULT_VOCAB_SIZE);
    sendJson(res, 200, {
      count: countTokens(words),
      max_model_len: maxModelLen,
      tokens,
      token_strs: returnStrs ? words.trim().split(/\s+/).filter(Boolean) : null,
    });
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

/** `path` as the engine sees it (under /models) in `modelsDir`, the volume's stand-in; undefined outside /models. */
function inVolume(modelsDir: string, path: string): string | undefined {
  const normalized = posix.normalize(path);
  if (!normalized.startsWith(`${MODELS_MOUNT}/`)) return undefined;
  return join(modelsDir, normalized.slice(MODELS_MOUNT.length));
}

/** Whether `path` holds an adapter in `modelsDir`. */
function adapterFilesThere(modelsDir: string, path: string): boolean {
  const dir = inVolume(modelsDir, path);
  return dir !== undefined && existsSync(join(dir, 'adapter_config.json'));
}

/** The rank (`r`) in an adapter's adapter_config.json in `modelsDir`, when it says one. */
function adapterRank(modelsDir: string, path: string): number | undefined {
  const dir = inVolume(modelsDir, path);
  try {
    const config = JSON.parse(readFileSync(join(dir!, 'adapter_config.json'), 'utf8')) as { r?: unknown };
    return typeof config.r === 'number' ? config.r : undefined;
  } catch {
    return undefined;
  }
}

/** The model's `vocab_size` from its config.json in the volume, when it is there. */
function vocabularySize(modelsDir: string, model: string): number | undefined {
  const dir = inVolume(modelsDir, model);
  if (dir === undefined || !existsSync(join(dir, 'config.json'))) return undefined;
  try {
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as {
      vocab_size?: unknown;
      text_config?: { vocab_size?: unknown };
    };
    const size = config.vocab_size ?? config.text_config?.vocab_size;
    return typeof size === 'number' && Number.isInteger(size) && size > 0 ? size : undefined;
  } catch {
    return undefined;
  }
}
