// vLLM's command line, so the stand-in can be launched with exactly the args Ferry gives the real engine. Only the
// flags that change observable behaviour are understood; vLLM has hundreds more, which are ignored with a warning.
import type { EngineSimOptions, LoraModule } from './server.js';

export class ArgsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArgsError';
  }
}

export interface ParsedEngineArgs {
  readonly options: EngineSimOptions;
  readonly warnings: readonly string[];
}

export type Env = Readonly<Record<string, string | undefined>>;

type FlagKind = 'string' | 'int' | 'number' | 'bool' | 'list';

const FLAGS: Readonly<Record<string, FlagKind>> = {
  model: 'string',
  'served-model-name': 'list',
  host: 'string',
  port: 'int',
  'max-model-len': 'string',
  'enable-lora': 'bool',
  'max-loras': 'int',
  'max-lora-rank': 'int',
  'lora-modules': 'list',
  'api-key': 'string',
  'max-num-seqs': 'int',
  // Stand-in only: no vLLM equivalent.
  'load-delay': 'number',
  'fail-after': 'number',
  'token-delay-ms': 'number',
  'batch-step-ms': 'number',
  'prefill-ms-per-token': 'number',
  'models-dir': 'string',
};

type FlagValue = string | boolean | readonly string[];

/**
 * Parses vLLM-style argv (`--flag value`, `--flag=value`, `--no-<bool>`, underscores or dashes, and the
 * `serve <model>` positional form) plus the environment variables vLLM and the stand-in read.
 */
export function parseEngineArgs(argv: readonly string[], env: Env = {}): ParsedEngineArgs {
  const values = new Map<string, FlagValue>();
  const warnings: string[] = [];
  const positionals: string[] = [];
  let i = 0;
  const peekValue = () => {
    const next = argv[i];
    return next !== undefined && !next.startsWith('-') ? next : undefined;
  };

  while (i < argv.length) {
    const token = argv[i++] as string;
    if (token === '--') {
      positionals.push(...argv.slice(i));
      break;
    }
    if (!token.startsWith('-') || token === '-') {
      positionals.push(token);
      continue;
    }
    const eq = token.indexOf('=');
    const inline = eq === -1 ? undefined : token.slice(eq + 1);
    // vLLM's parser treats --max_model_len and --max-model-len alike.
    const name = (eq === -1 ? token : token.slice(0, eq)).replace(/^--?/, '').replace(/_/g, '-');
    const kind = token.startsWith('--') ? FLAGS[name] : undefined;

    if (kind === undefined) {
      if (name.startsWith('no-') && FLAGS[name.slice(3)] === 'bool' && token.startsWith('--')) {
        if (inline !== undefined) throw new ArgsError(`--${name} takes no value`);
        values.set(name.slice(3), false);
        continue;
      }
      warnings.push(`ignoring unsupported vLLM flag ${token.startsWith('--') ? '--' : '-'}${name}`);
      // Unknown flags may take a value; a following token that is not itself a flag is assumed to be it.
      if (inline === undefined && peekValue() !== undefined) i += 1;
      continue;
    }
    if (kind === 'bool') {
      values.set(name, inline === undefined ? true : parseBool(name, inline));
      continue;
    }
    if (kind === 'list') {
      // Like argparse's nargs='+': take every following non-flag token; a repeated flag replaces the list.
      const items: string[] = [];
      if (inline !== undefined) items.push(inline);
      else while (peekValue() !== undefined) items.push(argv[i++] as string);
      if (items.length === 0 || items.some((item) => item === '')) throw new ArgsError(`--${name} expects a value`);
      values.set(name, items);
      continue;
    }
    // Value flags take the next token whatever it looks like, so `--max-model-len -1` works as in argparse.
    const value = inline ?? argv[i++];
    if (value === undefined) throw new ArgsError(`--${name} expects a value`);
    values.set(name, value);
  }

  // `vllm serve <model>`: the positional model tag wins over --model, as in vLLM.
  if (positionals[0] === 'serve') positionals.shift();
  if (positionals.length > 1) throw new ArgsError(`unrecognized arguments: ${positionals.slice(1).join(' ')}`);

  const model = positionals[0] ?? str(values, 'model');
  const enableLora = values.get('enable-lora') === true;
  const loraModules = list(values, 'lora-modules')?.map(parseLoraModule);
  if (loraModules?.length && !enableLora) throw new ArgsError('--lora-modules requires --enable-lora');

  const options: EngineSimOptions = {
    model,
    servedModelNames: list(values, 'served-model-name'),
    host: str(values, 'host'),
    port: int(values, 'port', 0, 65535),
    maxModelLen: contextLength(str(values, 'max-model-len')),
    enableLora,
    maxLoras: int(values, 'max-loras', 1),
    maxLoraRank: int(values, 'max-lora-rank', 1),
    loraModules,
    allowRuntimeLoraUpdating: isTruthyEnv(env.VLLM_ALLOW_RUNTIME_LORA_UPDATING),
    apiKey: nonEmpty(str(values, 'api-key')) ?? nonEmpty(env.VLLM_API_KEY),
    maxNumSeqs: int(values, 'max-num-seqs', 1),
    loadDelaySeconds: simKnob(values, env, 'load-delay', 'FERRY_SIM_LOAD_DELAY'),
    failAfterSeconds: simKnob(values, env, 'fail-after', 'FERRY_SIM_FAIL_AFTER'),
    tokenDelayMs: simKnob(values, env, 'token-delay-ms', 'FERRY_SIM_TOKEN_DELAY_MS'),
    batchStepMs: simKnob(values, env, 'batch-step-ms', 'FERRY_SIM_BATCH_STEP_MS'),
    prefillMsPerToken: simKnob(values, env, 'prefill-ms-per-token', 'FERRY_SIM_PREFILL_MS_PER_TOKEN'),
    modelsDir: nonEmpty(str(values, 'models-dir')) ?? nonEmpty(env.FERRY_SIM_MODELS_DIR),
  };
  return { options, warnings };
}

/** vLLM reads VLLM_ALLOW_RUNTIME_LORA_UPDATING as true when it is "1" or "true", in any case. */
function isTruthyEnv(value: string | undefined): boolean {
  return value !== undefined && ['1', 'true'].includes(value.trim().toLowerCase());
}

function str(values: Map<string, FlagValue>, name: string): string | undefined {
  const value = values.get(name);
  return typeof value === 'string' ? value : undefined;
}

function list(values: Map<string, FlagValue>, name: string): readonly string[] | undefined {
  const value = values.get(name);
  return Array.isArray(value) ? (value as readonly string[]) : undefined;
}

function int(values: Map<string, FlagValue>, name: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  const raw = str(values, name);
  if (raw === undefined) return undefined;
  const value = /^-?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    throw new ArgsError(`--${name} expects an integer in [${min}, ${max}], got ${raw}`);
  }
  return value;
}

/** A stand-in-only number: the flag, else its environment variable (Ferry passes the engine's args unchanged). */
function simKnob(values: Map<string, FlagValue>, env: Env, name: string, envName: string): number | undefined {
  const raw = str(values, name) ?? nonEmpty(env[envName]);
  if (raw === undefined) return undefined;
  const value = raw.trim() === '' ? Number.NaN : Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new ArgsError(`--${name} expects a non-negative number, got ${raw}`);
  return value;
}

/** vLLM accepts human-readable lengths (`32k` = 32000, `32K` = 32768) and -1/auto for "the model's own". */
function contextLength(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '-1' || raw.toLowerCase() === 'auto') return undefined;
  const match = /^(\d+(?:\.\d+)?)([kmg]?)$/i.exec(raw.trim());
  if (!match) throw new ArgsError(`--max-model-len expects a token count such as 4096 or 32k, got ${raw}`);
  const suffix = match[2] ?? '';
  const exponent = ['', 'k', 'm', 'g'].indexOf(suffix.toLowerCase());
  const base = suffix !== '' && suffix === suffix.toUpperCase() ? 1024 : 1000;
  const value = Math.round(Number(match[1]) * base ** exponent);
  if (!Number.isSafeInteger(value) || value < 1) throw new ArgsError(`--max-model-len must be positive, got ${raw}`);
  return value;
}

function parseBool(name: string, raw: string): boolean {
  const lowered = raw.toLowerCase();
  if (['1', 'true', 'yes'].includes(lowered)) return true;
  if (['0', 'false', 'no'].includes(lowered)) return false;
  throw new ArgsError(`--${name} expects true or false, got ${raw}`);
}

/** vLLM takes `name=path` or a JSON object with `name` and `path`. */
function parseLoraModule(raw: string): LoraModule {
  if (raw.trim().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new ArgsError(`--lora-modules: invalid JSON ${raw}`);
    }
    const { name, path } = (parsed ?? {}) as Record<string, unknown>;
    if (typeof name !== 'string' || typeof path !== 'string' || !name || !path) {
      throw new ArgsError(`--lora-modules: JSON needs string "name" and "path", got ${raw}`);
    }
    return { name, path };
  }
  const eq = raw.indexOf('=');
  if (eq <= 0 || eq === raw.length - 1) throw new ArgsError(`--lora-modules expects name=path, got ${raw}`);
  return { name: raw.slice(0, eq), path: raw.slice(eq + 1) };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}
