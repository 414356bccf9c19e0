// The routes about what the engine serves: /v1/models, /tokenize and runtime LoRA (/v1/load_lora_adapter,
// /v1/unload_lora_adapter, with vLLM 0.32's checks), and what the stand-in reads of the models volume.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, posix } from 'node:path';
import { unknownModel, type GenerationContext } from './completions.js';
import { OpenAiHttpError, readJsonObject, sendJson, sendText } from './http-io.js';
import { RequestFields } from './request-fields.js';
import { countTokens, tokenIds } from './synthetic-text.js';

/** Token ids /tokenize hands out when the model's vocabulary size is unknown (no --models-dir). */
const DEFAULT_VOCAB_SIZE = 32_000;
/** Where the engine's pod mounts the model's volume. */
const MODELS_MOUNT = '/models';

/** What the model routes read of their engine (server.ts). */
interface ModelRoutesContext {
  /** `--model`: the weights path, reported as the base model's `root`. */
  readonly model: string;
  readonly servedModelNames: readonly string[];
  /** The first served name: what vLLM reports back, and every adapter's parent. */
  readonly baseName: string;
  readonly maxModelLen: number;
  readonly enableLora: boolean;
  /** LoRA name -> path, static and runtime-loaded alike; loading and unloading change it. */
  readonly loras: Map<string, string>;
  readonly vocabSize: number | undefined;
  readonly resolveModel: GenerationContext['resolveModel'];
  /** The engine's options the LoRA checks read (EngineSimOptions). */
  readonly options: { readonly modelsDir?: string; readonly maxLoraRank?: number };
}

export function modelRoutes(ctx: ModelRoutesContext) {
  const { model, servedModelNames, baseName, maxModelLen, enableLora, loras, vocabSize, resolveModel, options } = ctx;

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

  return { modelList, loadLora, unloadLora, tokenize };
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
export function vocabularySize(modelsDir: string, model: string): number | undefined {
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
