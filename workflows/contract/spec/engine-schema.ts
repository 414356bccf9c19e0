// The vLLM engine: its image, arguments, environment, API key and LoRA adapters. Pure (no Node): it is bundled into
// workflow code.
import { z } from 'zod';
import { acceptedBefore } from './accepted-before.js';
import { argProblem, ENGINE_ARG, positionalProblems } from './engine-args.js';
import { IMAGE_REFERENCE, imageProblem } from './image-ref.js';
import { C_IDENTIFIER, C_IDENTIFIER_BODY, duration, int, jsonRule, objectName, quote, rules, strict } from './rules.js';
import { PRINTABLE_CHARACTER } from './text.js';
import { withFieldRules } from './field-rules.js';
import { parserOnly } from './parser-only.js';
import { describedSecretRef, sourceSchema } from './source-schema.js';

export const DEFAULT_ENGINE_IMAGE = 'vllm/vllm-openai:v0.32.0';

export const imageRef = rules(
  z.string(),
  (v) =>
    v.length > 0 && !/\s/.test(v)
      ? undefined
      : `must be a container image like ${DEFAULT_ENGINE_IMAGE}, got ${quote(v)}`,
  (v) => {
    // The whole grammar was added after images were accepted with only the rule above.
    const problem = acceptedBefore('bounds') ? undefined : imageProblem(v);
    return problem
      ? `must be an image reference like ${DEFAULT_ENGINE_IMAGE} ([registry/]repository[:tag][@digest]), got ${quote(v)}: ${problem}`
      : undefined;
  },
).meta(jsonRule(IMAGE_REFERENCE));

/** Variables Ferry sets in a container, each with why: by name, and by the start of a name. */
export interface ReservedEnv {
  names: Record<string, string>;
  prefixes?: Record<string, string>;
}

const ENGINE_RESERVED: ReservedEnv = {
  names: {
    VLLM_API_KEY: 'is set by Ferry from engine.apiKeySecret; put the key in a Secret and name it there',
    HF_TOKEN: 'comes only from source.huggingface.tokenSecret, and only the puller gets it',
    HF_HUB_OFFLINE: 'is set to 1 by Ferry: the engine reads model files only from its volume',
    VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'is set by Ferry when engine.lora.enabled is true; set that instead',
  },
};

const hasOwn = (record: Record<string, string>, key: string): boolean => Object.hasOwn(record, key);

function reservedWhy(reserved: ReservedEnv, name: string): string | undefined {
  if (hasOwn(reserved.names, name)) return reserved.names[name];
  const prefix = Object.keys(reserved.prefixes ?? {}).find((start) => name.startsWith(start));
  return prefix === undefined ? undefined : reserved.prefixes![prefix];
}

// A variable name (a C identifier) that starts with none of the reserved prefixes; the reserved names are the
// schema's `not: { enum }`.
function envNamePattern(reserved: ReservedEnv): RegExp {
  const prefixes = Object.keys(reserved.prefixes ?? {});
  const notReserved = prefixes.length ? `(?!${prefixes.join('|')})` : '';
  return new RegExp(`^${notReserved}${C_IDENTIFIER_BODY}$`, 'u');
}

function envVarSchema(reserved: ReservedEnv) {
  const pattern = envNamePattern(reserved);
  const fields = strict({
    name: rules(
      z.string(),
      (v) =>
        C_IDENTIFIER.test(v)
          ? undefined
          : `must be a variable name of letters, digits and "_", not starting with a digit, got ${quote(v)}`,
      (v) => {
        const why = reservedWhy(reserved, v);
        return why ? `${v} ${why}` : undefined;
      },
    )
      .meta({ ...jsonRule(pattern), not: { enum: Object.keys(reserved.names) } })
      .describe("The variable's name."),
    value: z
      .union([z.string(), z.number(), z.boolean()], { error: 'must be a string (quote numbers and booleans)' })
      .transform((v) => String(v))
      .optional()
      .describe('Its value (a number or boolean becomes a string); give value or valueFrom, not both.'),
    valueFrom: strict({
      secretKeyRef: strict({
        name: objectName('Secret', 'my-secret').describe("The name of a Secret in the model's namespace."),
        key: z.string().min(1, 'must not be empty').describe('The key of that Secret that holds the value.'),
      }).describe('The Secret and key that hold the value.'),
    })
      .optional()
      .describe("Where the value comes from instead: a key of a Secret, so it stays out of the pod's spec."),
  });
  return withFieldRules(fields, [
    {
      when: { field: 'value', set: true },
      then: { field: 'valueFrom', set: false },
      message: 'give either value or valueFrom, not both',
    },
  ]);
}

/** A list of environment variables, each name once. */
export function envListSchema(reserved: ReservedEnv) {
  return z
    .array(envVarSchema(reserved))
    .superRefine((env, ctx) => {
      const seen = new Set<string>();
      env.forEach((variable, index) => {
        if (seen.has(variable.name)) {
          ctx.addIssue({
            code: 'custom',
            path: [index, 'name'],
            message: `${variable.name} is listed twice`,
            params: parserOnly('listed-once'),
          });
        }
        seen.add(variable.name);
      });
    })
    .default([]);
}

const engineEnvSchema = envListSchema(ENGINE_RESERVED);

export type EnvVar = z.output<typeof engineEnvSchema>[number];

// vLLM's accepted --max-lora-rank values (its MaxLoRARanks).
const MAX_LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;
const MAX_ADAPTERS = 64;

// An adapter's model name: letters, digits, ".", "_", "-" and "/", starting with a letter or digit, without ".." or an
// empty part.
const ADAPTER_NAME = /^(?!.*\.\.)(?!.*\/\/)(?!.*\/$)[A-Za-z0-9][A-Za-z0-9._/-]*$/u;
const ADAPTER_NAME_MAX = 128;
// A model name clients send: no spaces, not starting with "-".
const SERVED_MODEL_NAME = new RegExp(`^(?!-)(?:(?!\\s)${PRINTABLE_CHARACTER})+$`, 'u');
const SERVED_MODEL_NAME_MAX = 256;

const adapterSchema = strict({
  name: rules(z.string(), (v) =>
    v.length <= ADAPTER_NAME_MAX && ADAPTER_NAME.test(v)
      ? undefined
      : `must be the adapter's model name, up to 128 letters, digits, ".", "_", "-" and "/" (starting with a letter or digit, no ".." or empty "/" parts), like sql or team/sql-v2, got ${quote(v)}`,
  )
    .meta(jsonRule(ADAPTER_NAME, { maxLength: ADAPTER_NAME_MAX }))
    .describe('The name clients send as the model of a request to use this adapter.'),
  source: sourceSchema.describe("Where the adapter's files come from: exactly one of huggingface, pvc, s3 or oci."),
});

export type AdapterSpec = z.output<typeof adapterSchema>;

// LoRA: adapters need it enabled, as the engine serves them only then.
const loraSchema = withFieldRules(
  strict({
    enabled: z
      .boolean({ error: 'must be true or false' })
      .default(false)
      .describe('Lets the engine serve LoRA adapters, loaded and unloaded at run time.'),
    maxLoras: int('a whole number of adapters, at least 1')
      .min(1, 'must be at least 1')
      .default(4)
      .describe(
        "How many adapters one batch may use at once (vLLM's --max-loras); more can be loaded, and are read from disk again when used.",
      ),
    maxLoraRank: z
      .union(
        MAX_LORA_RANKS.map((rank) => z.literal(rank)),
        { error: `must be one of vLLM's LoRA ranks: ${MAX_LORA_RANKS.join(', ')}` },
      )
      .optional()
      .describe(
        `The highest rank of an adapter the engine accepts (vLLM's --max-lora-rank): one of ${MAX_LORA_RANKS.join(', ')}. Unset: vLLM's default, 16.`,
      ),
    adapters: z
      .array(adapterSchema)
      .max(MAX_ADAPTERS, `must list at most ${MAX_ADAPTERS} adapters`)
      .superRefine((adapters, ctx) => {
        const seen = new Set<string>();
        adapters.forEach((adapter, index) => {
          if (seen.has(adapter.name)) {
            ctx.addIssue({
              code: 'custom',
              path: [index, 'name'],
              message: `${quote(adapter.name)} is listed twice`,
              params: parserOnly('listed-once'),
            });
          }
          seen.add(adapter.name);
        });
      })
      .optional()
      .describe(
        "The adapters every ready replica holds: Ferry puts their files on the model's volume and loads each on every replica, again after a restart. Unset: clients load and unload adapters themselves.",
      ),
  }),
  [
    {
      when: { field: 'adapters', set: true },
      then: { field: 'enabled', is: true },
      at: 'adapters',
      message: 'needs engine.lora.enabled: true (the engine serves adapters only with LoRA enabled)',
    },
  ],
);

export const engineSchema = strict({
  image: imageRef.default(DEFAULT_ENGINE_IMAGE).describe('The vLLM container image (its entrypoint is vllm serve).'),
  servedModelName: rules(z.string(), (v) =>
    v.length <= SERVED_MODEL_NAME_MAX && SERVED_MODEL_NAME.test(v)
      ? undefined
      : `must be a model name without spaces, not starting with "-" (like qwen or Qwen/Qwen2.5-0.5B-Instruct), got ${quote(v)}`,
  )
    .meta(jsonRule(SERVED_MODEL_NAME, { maxLength: SERVED_MODEL_NAME_MAX }))
    .optional()
    .describe('The model name clients send in requests. Unset: metadata.name.'),
  port: int('a port number from 1 to 65535')
    .min(1, 'must be a port number from 1 to 65535')
    .max(65535, 'must be a port number from 1 to 65535')
    .default(8000)
    .describe('The port vLLM listens on, and the port of the Service.'),
  args: z
    .array(
      z.string({ error: 'must be a string (quote numbers, e.g. "--max-model-len=4096")' }).meta(jsonRule(ENGINE_ARG)),
    )
    .superRefine((args, ctx) => {
      const positional = positionalProblems(args);
      args.forEach((arg, index) => {
        const refused = argProblem(arg);
        if (refused) ctx.addIssue({ code: 'custom', path: [index], message: refused });
        const outOfOrder = refused ? undefined : positional.get(index);
        if (outOfOrder) {
          ctx.addIssue({ code: 'custom', path: [index], message: outOfOrder, params: parserOnly('args-in-order') });
        }
      });
    })
    .default([])
    .describe(
      'More vLLM arguments: flags, each followed by as many values as vLLM lets it take, like --max-model-len=4096 or --max-model-len and 4096 as two items (--enforce-eager takes none; --no-enforce-eager turns it off). Not --model, --served-model-name, --port or --api-key, which Ferry sets.',
    ),
  env: engineEnvSchema.describe(
    "More environment variables of the engine's container; not VLLM_API_KEY, HF_TOKEN, HF_HUB_OFFLINE or VLLM_ALLOW_RUNTIME_LORA_UPDATING, which Ferry sets.",
  ),
  apiKeySecret: describedSecretRef('qwen-api-key')
    .optional()
    .describe(
      'A Secret with the API key clients must send; it reaches vLLM only as VLLM_API_KEY from the Secret. Unset: no key.',
    ),
  lora: loraSchema.prefault({}).describe('LoRA adapters on top of the base model.'),
  startupTimeout: duration('40m')
    .default('40m')
    .describe('How long loading may take before the engine counts as failed, like 40m or 1h30m.'),
});
