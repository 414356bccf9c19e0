// The ServedModel document: the one contract between people, clients, the workflow and the builders.
// Pure (no Node, no Kubernetes client): it is bundled into workflow code.
import { z } from 'zod';
import { DEFAULT_CLUSTER } from '../identity.js';
import { parseQuantity } from './quantities.js';
import { VLLM_FLAG_VALUES } from './vllm-flags.js';
import {
  C_IDENTIFIER,
  dnsLabel,
  duration,
  HF_REPO,
  int,
  isSubdomain,
  labelKey,
  labelMap,
  modelName,
  mustBe,
  objectName,
  qualifiedNameProblem,
  quantity,
  quote,
  requirementValuesProblem,
  revisionProblem,
  rules,
  secretRef,
  strict,
} from './rules.js';

export const API_VERSION = 'ferry.dev/v1alpha1';
export const KIND = 'ServedModel';
export const DEFAULT_ENGINE_IMAGE = 'vllm/vllm-openai:v0.32.0';

const imageRef = rules(z.string(), (v) =>
  v.length > 0 && !/\s/.test(v) ? undefined : `must be a container image like ${DEFAULT_ENGINE_IMAGE}, got ${quote(v)}`,
);

// rules.ts builds the reference; its fields get their descriptions (JSON Schema, docs/spec.md) here.
function describedSecretRef(example: string) {
  const ref = secretRef(example);
  ref.shape.name.register(z.globalRegistry, { description: "The name of a Secret in the model's namespace." });
  ref.shape.key.register(z.globalRegistry, { description: 'The key of that Secret that holds the value.' });
  return ref;
}

// ---------------------------------------------------------------------------------------------------------------
// Source

const huggingFaceSchema = strict({
  repo: rules(
    z.string(),
    (v) =>
      /^https?:\/\//.test(v)
        ? `must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, not a URL, got ${quote(v)}`
        : undefined,
    (v) =>
      v.length <= 96 && HF_REPO.test(v) && !/--|\.\./.test(v)
        ? undefined
        : `must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, got ${quote(v)}`,
  ).describe('The model id on the Hugging Face Hub, like Qwen/Qwen2.5-0.5B-Instruct (not a URL).'),
  revision: rules(z.string(), (v) => {
    const problem = revisionProblem(v);
    return problem
      ? `must be a branch, tag or commit of the repository (like main, v1.2, refs/pr/1 or a commit sha), got ${quote(v)}: ${problem}`
      : undefined;
  })
    .default('main')
    .describe('A branch, tag or commit of the repository; pin a commit to make re-runs exact.'),
  tokenSecret: describedSecretRef('hf-token')
    .optional()
    .describe('A Secret with a Hugging Face token, only for private or gated repositories; only the puller gets it.'),
});

const pvcSourceSchema = strict({
  claimName: objectName('PersistentVolumeClaim in the same namespace', 'checkpoints').describe(
    "The PersistentVolumeClaim in the model's namespace that holds the checkpoint (not the model's own <name>-weights).",
  ),
  path: rules(z.string(), (v) => {
    if (v === '') return undefined;
    if (v.startsWith('/')) return `must be relative to the root of the claim, like run-42/step-1000, got ${quote(v)}`;
    const parts = v.split('/');
    return parts.some((part) => part === '' || part === '.' || part === '..' || part.includes('\0'))
      ? `must be a plain relative path without empty, "." or ".." parts, like run-42/step-1000, got ${quote(v)}`
      : undefined;
  })
    .default('')
    .describe("The checkpoint's directory relative to the root of the claim, like run-42/step-1000; empty: the root."),
});

export type HuggingFaceSource = z.output<typeof huggingFaceSchema>;
export type PvcSource = z.output<typeof pvcSourceSchema>;
/** Exactly one of `huggingface` or `pvc`. */
export type SourceSpec =
  { huggingface: HuggingFaceSource; pvc?: undefined } | { pvc: PvcSource; huggingface?: undefined };

const sourceSchema = strict({
  huggingface: huggingFaceSchema.optional().describe('A model repository on the Hugging Face Hub.'),
  pvc: pvcSourceSchema
    .optional()
    .describe("A checkpoint already on a volume; the puller copies it into the model's own volume."),
})
  .superRefine((source, ctx) => {
    if (source.huggingface && source.pvc) {
      ctx.addIssue({
        code: 'custom',
        message:
          'give exactly one source, not both: huggingface (a model repository) or pvc (a checkpoint on a volume)',
      });
    } else if (!source.huggingface && !source.pvc) {
      ctx.addIssue({
        code: 'custom',
        message: 'give exactly one source: huggingface (a model repository) or pvc (a checkpoint on a volume)',
      });
    }
  })
  .transform((source) => source as SourceSpec);

// ---------------------------------------------------------------------------------------------------------------
// Engine

const RESERVED_ENV: Record<string, string> = {
  VLLM_API_KEY: 'is set by Ferry from engine.apiKeySecret; put the key in a Secret and name it there',
  HF_TOKEN: 'comes only from source.huggingface.tokenSecret, and only the puller gets it',
  HF_HUB_OFFLINE: 'is set to 1 by Ferry: the engine reads model files only from its volume',
  VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'is set by Ferry when engine.lora.enabled is true; set that instead',
};

// Variables Ferry sets in the puller's container (the weight and adapter downloads).
function pullerReserved(name: string): string | undefined {
  if (name.startsWith('FERRY_')) return "is a name of the puller program's own settings, which Ferry sets";
  if (name === 'HF_TOKEN') return 'comes only from source.huggingface.tokenSecret';
  if (name === 'HF_HUB_OFFLINE') return 'would stop the download: the puller is the one that reaches the Hub';
  return undefined;
}

function envVarSchema(reserved: (name: string) => string | undefined) {
  return strict({
    name: rules(
      z.string(),
      (v) =>
        C_IDENTIFIER.test(v)
          ? undefined
          : `must be a variable name of letters, digits and "_", not starting with a digit, got ${quote(v)}`,
      (v) => {
        const why = reserved(v);
        return why ? `${v} ${why}` : undefined;
      },
    ).describe("The variable's name."),
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
  }).superRefine((env, ctx) => {
    if (env.value !== undefined && env.valueFrom !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'give either value or valueFrom, not both' });
    }
  });
}

/** A list of environment variables, each name once. */
function envListSchema(reserved: (name: string) => string | undefined) {
  return z
    .array(envVarSchema(reserved))
    .superRefine((env, ctx) => {
      const seen = new Set<string>();
      env.forEach((variable, index) => {
        if (seen.has(variable.name)) {
          ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `${variable.name} is listed twice` });
        }
        seen.add(variable.name);
      });
    })
    .default([]);
}

const engineEnvSchema = envListSchema((name) => RESERVED_ENV[name]);

export type EnvVar = z.output<typeof engineEnvSchema>[number];

// vLLM's accepted --max-lora-rank values (its MaxLoRARanks).
const MAX_LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;
const MAX_ADAPTERS = 64;

const adapterSchema = strict({
  name: rules(z.string(), (v) =>
    v.length <= 128 && /^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(v) && !v.includes('..') && !/\/\/|\/$/.test(v)
      ? undefined
      : `must be the adapter's model name, up to 128 letters, digits, ".", "_", "-" and "/" (starting with a letter or digit, no ".." or empty "/" parts), like sql or team/sql-v2, got ${quote(v)}`,
  ).describe('The name clients send as the model of a request to use this adapter.'),
  source: sourceSchema.describe("Where the adapter's files come from: exactly one of huggingface or pvc."),
});

export type AdapterSpec = z.output<typeof adapterSchema>;

// Flags Ferry sets itself, and the fields that replace them. vLLM reads `--api_key` as `--api-key`.
const FERRY_FLAGS: Record<string, string> = {
  '--api-key':
    'must not be passed as an argument (arguments are visible in the pod spec and process list); set engine.apiKeySecret and Ferry passes the key as VLLM_API_KEY from the Secret',
  '--model': 'is set by Ferry to the weights on the volume; choose the weights with spec.source',
  '--served-model-name': 'is set by Ferry; use engine.servedModelName',
  '--port': 'is set by Ferry; use engine.port',
};

function argProblem(arg: string): string | undefined {
  if (!arg.startsWith('-')) return undefined;
  const flag = arg.split('=', 1)[0]!;
  if (/\s/.test(flag)) {
    return `${quote(arg)} is one argument with a space in it; write "--flag=value" or put the flag and the value in two list items`;
  }
  const normalized = flag.replace(/_/g, '-');
  const reason = FERRY_FLAGS[normalized];
  if (reason) return `${normalized} ${reason}`;
  // argparse also takes a prefix of a long option as that option (--por=9 is --port=9, --served-model is
  // --served-model-name); a prefix of one of Ferry's flags that also starts another vLLM flag makes vLLM exit.
  if (!normalized.startsWith('--') || normalized.length < 3) return undefined;
  const owned = Object.keys(FERRY_FLAGS).find((ferryFlag) => ferryFlag.startsWith(normalized));
  return owned
    ? `${quote(flag)} abbreviates ${owned} (vLLM reads a prefix of a flag as the flag): ${owned} ${FERRY_FLAGS[owned]}`
    : undefined;
}

// An item of engine.args that is not a flag is read by vLLM only as a value of the flag before it, as many as that
// flag takes (VLLM_FLAG_VALUES, read from vLLM's own parser); any other item is a positional argument, which vLLM
// refuses at start-up ("unrecognized arguments"). Ferry's own flags come first, each with its value.
interface FlagItem {
  /** The item as written. */
  item: string;
  /** Its name: before "=", underscores read as dashes (as vLLM reads them). */
  name: string;
  /**
   * What may follow: the table's none/one/optional/many; unknown (a flag this vLLM does not know, from a newer or an
   * older one: anything); inline (its value is after "="); dotted (vLLM's --config.key takes the next item, whatever
   * it is); rest ("--": vLLM reads every item after it as positional).
   */
  takes: 'none' | 'one' | 'optional' | 'many' | 'unknown' | 'inline' | 'dotted' | 'rest';
  /** The values that followed it. */
  values: string[];
}

const NEGATIVE_INTEGER = /^-\d+$/;
// argparse reads these as negative numbers, but vLLM reads an item with "-" and "." as --config.key first.
const NEGATIVE_DECIMAL = /^-\d*\.\d+$/;
const UNRECOGNIZED = 'vLLM would refuse it as an unrecognized argument';

function flagItem(item: string): FlagItem {
  const written = item.split('=', 1)[0]!;
  const flag = { item, name: written.startsWith('--') ? written.replace(/_/g, '-') : written, values: [] };
  if (item === '--') return { ...flag, takes: 'rest' };
  // -O3 and -O=3 are vLLM's shorthand for --optimization-level=3.
  if (written !== item || /^-O./.test(item)) return { ...flag, takes: 'inline' };
  if (flag.name.includes('.')) return { ...flag, takes: 'dotted' };
  return { ...flag, takes: VLLM_FLAG_VALUES[flag.name] ?? 'unknown' };
}

function roomAfter(flag: FlagItem): number {
  switch (flag.takes) {
    case 'many':
    case 'unknown':
      return Infinity;
    case 'one':
    case 'optional':
    case 'dotted':
      return 1 - flag.values.length;
    default:
      return 0;
  }
}

/** A flag for a message: its name when vLLM knows it, else the item as written. */
const shown = (flag: FlagItem): string => (VLLM_FLAG_VALUES[flag.name] ? flag.name : quote(flag.item));

/** " (or --no-x)" after a boolean flag --x, " (or --x)" after --no-x. */
function otherSpelling(name: string): string {
  const other = name.startsWith('--no-') ? `--${name.slice(5)}` : `--no-${name.slice(2)}`;
  return name.startsWith('--') && VLLM_FLAG_VALUES[other] === 'none' ? ` (or ${other})` : '';
}

function notAValue(arg: string, last: FlagItem | undefined): string {
  const trimmed = arg.trimStart();
  if (trimmed !== arg && trimmed.startsWith('-')) {
    const problem = argProblem(trimmed);
    return `${quote(arg)} has leading whitespace, so it is not a flag: ${UNRECOGNIZED}; write ${quote(trimmed)}${problem ? `, though ${problem}` : ''}`;
  }
  if (!last) {
    return `${quote(arg)} is not a flag and follows no flag that takes a value: ${UNRECOGNIZED}; write it after its flag, like --max-model-len 4096 or --max-model-len=4096`;
  }
  switch (last.takes) {
    case 'none':
      return `${quote(arg)} follows ${last.name}, which takes no value: ${UNRECOGNIZED}; write ${last.name} alone${otherSpelling(last.name)}`;
    case 'inline':
      return `${quote(arg)} follows ${quote(last.item)}, which already has its value${last.item.includes('=') ? ' after "="' : ''}: ${UNRECOGNIZED}; give the flag one value, after "=" or as the next item`;
    case 'rest':
      return `${quote(arg)} follows "--", after which vLLM reads every item as a positional argument: ${UNRECOGNIZED}; remove the "--"`;
    default:
      return `${quote(arg)} follows ${shown(last)} ${last.values.map((value) => quote(value)).join(' ')}, which takes ${last.takes === 'optional' ? 'at most ' : ''}one value: ${UNRECOGNIZED}; remove it, or write it after the flag it belongs to`;
  }
}

// Rules added after a spec may already have been accepted (the positional-argument rule above, 2026-12): a workflow
// replaying an update or a child start accepted before the rule existed must accept it again, so the parse that
// replays it runs with them relaxed. Synchronous, so workflow code stays deterministic.
let relaxed = false;

/** Runs `parse` with the rules added after specs were accepted without them turned off (replays only). */
export function asAcceptedBefore<T>(parse: () => T): T {
  relaxed = true;
  try {
    return parse();
  } finally {
    relaxed = false;
  }
}

/** The items of engine.args that vLLM would refuse as positional arguments (or as a value it cannot take), by index. */
function positionalProblems(args: readonly string[]): Map<number, string> {
  const problems = new Map<number, string>();
  if (relaxed) return problems;
  let last: FlagItem | undefined;
  args.forEach((arg, index) => {
    if (last?.takes === 'dotted' && last.values.length === 0) {
      last.values.push(arg);
    } else if (arg.length > 1 && arg.startsWith('-') && !NEGATIVE_INTEGER.test(arg)) {
      if (NEGATIVE_DECIMAL.test(arg)) {
        const flag = last && roomAfter(last) > 0 ? last.name : '--flag';
        problems.set(
          index,
          `${quote(arg)} is not read as a negative number: vLLM reads an item that starts with "-" and has a "." as a --config.key setting; write the flag and its value as one item, like ${quote(`${flag}=${arg}`)}`,
        );
      }
      last = flagItem(arg);
      if (last.takes === 'inline' && VLLM_FLAG_VALUES[last.name] === 'none') {
        problems.set(
          index,
          `${quote(arg)}: ${last.name} takes no value, and vLLM refuses one after "="; write ${last.name} alone${otherSpelling(last.name)}`,
        );
      }
    } else if (last && roomAfter(last) > 0) {
      last.values.push(arg);
    } else {
      problems.set(index, notAValue(arg, last));
    }
  });
  return problems;
}

const engineSchema = strict({
  image: imageRef.default(DEFAULT_ENGINE_IMAGE).describe('The vLLM container image (its entrypoint is vllm serve).'),
  servedModelName: rules(z.string(), (v) =>
    v.length > 0 && v.length <= 256 && !/\s/.test(v) && !v.startsWith('-')
      ? undefined
      : `must be a model name without spaces, not starting with "-" (like qwen or Qwen/Qwen2.5-0.5B-Instruct), got ${quote(v)}`,
  )
    .optional()
    .describe('The model name clients send in requests. Unset: metadata.name.'),
  port: int('a port number from 1 to 65535')
    .min(1, 'must be a port number from 1 to 65535')
    .max(65535, 'must be a port number from 1 to 65535')
    .default(8000)
    .describe('The port vLLM listens on, and the port of the Service.'),
  args: z
    .array(z.string({ error: 'must be a string (quote numbers, e.g. "--max-model-len=4096")' }))
    .superRefine((args, ctx) => {
      const positional = positionalProblems(args);
      args.forEach((arg, index) => {
        const message = argProblem(arg) ?? positional.get(index);
        if (message) ctx.addIssue({ code: 'custom', path: [index], message });
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
  lora: strict({
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
            ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `${quote(adapter.name)} is listed twice` });
          }
          seen.add(adapter.name);
        });
      })
      .optional()
      .describe(
        "The adapters every ready replica holds: Ferry puts their files on the model's volume and loads each on every replica, again after a restart. Unset: clients load and unload adapters themselves.",
      ),
  })
    .prefault({})
    .describe('LoRA adapters on top of the base model.'),
  startupTimeout: duration('40m')
    .default('40m')
    .describe('How long loading may take before the engine counts as failed, like 40m or 1h30m.'),
});

// ---------------------------------------------------------------------------------------------------------------
// Resources, storage, scheduling, puller

const resourcesSchema = strict({
  gpus: int('a whole number of GPUs, 0 or more')
    .min(0, 'must be 0 or more')
    .default(1)
    .describe('GPUs per engine pod; 0 for none.'),
  gpuResource: rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v, true);
    return problem
      ? `must be an extended resource name with a domain, like nvidia.com/gpu or amd.com/gpu, got ${quote(v)} (${problem})`
      : undefined;
  })
    .default('nvidia.com/gpu')
    .describe("The GPUs' extended resource name, like nvidia.com/gpu or amd.com/gpu."),
  // Sized to fit the smallest common GPU nodes (4 vCPU, 16 GiB); raise them for big models.
  cpu: quantity('4 or 500m')
    .default('2')
    .describe('CPU per engine pod (request and limit), a quantity like 4 or 500m.'),
  memory: quantity('32Gi').default('12Gi').describe('Memory per engine pod (request and limit), a quantity like 32Gi.'),
  shmSize: quantity('8Gi')
    .default('2Gi')
    .describe("The size of /dev/shm: memory-backed, it counts against the pod's memory, so it must be smaller."),
});

const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteOncePod', 'ReadWriteMany'] as const;

const storageSchema = strict({
  size: quantity('50Gi')
    .default('50Gi')
    .describe('The size of the volume: it holds old and new weights while a new source is pulled. It can only grow.'),
  storageClassName: rules(z.string(), (v) =>
    v === '' || isSubdomain(v)
      ? undefined
      : `must be the name of a StorageClass, or null for the cluster's default class, got ${quote(v)}`,
  )
    .nullable()
    .default(null)
    .describe("The volume's StorageClass; null: the cluster's default class. Cannot change later."),
  accessMode: z
    .enum(ACCESS_MODES, { error: mustBe(...ACCESS_MODES) })
    .default('ReadWriteOnce')
    .describe("The volume's access mode; ReadWriteOncePod allows at most 1 replica. Cannot change later."),
  retainOnDelete: z
    .boolean({ error: 'must be true or false' })
    .default(false)
    .describe('Keep the volume and its weights when the model is deleted.'),
});

const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;

const tolerationSchema = strict({
  key: rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v);
    return problem ? `must be a taint key like nvidia.com/gpu, got ${quote(v)} (${problem})` : undefined;
  })
    .optional()
    .describe('The taint key, like nvidia.com/gpu; empty with operator Exists: every taint.'),
  operator: z
    .enum(['Exists', 'Equal'], { error: mustBe('Exists', 'Equal') })
    .optional()
    .describe('Exists (any value) or Equal (the value below). Unset: Equal.'),
  value: z.string().optional().describe('The taint value to match with operator Equal.'),
  effect: z
    .enum(TAINT_EFFECTS, { error: mustBe(...TAINT_EFFECTS) })
    .optional()
    .describe('The taint effect to match; unset: every effect.'),
  tolerationSeconds: int('a whole number of seconds')
    .optional()
    .describe('With effect NoExecute: how long the pod stays on a node after the taint appears.'),
}).superRefine((toleration, ctx) => {
  if (toleration.operator === 'Exists' && toleration.value) {
    ctx.addIssue({ code: 'custom', path: ['value'], message: 'must be empty when operator is Exists' });
  }
  if (toleration.tolerationSeconds !== undefined && toleration.effect !== 'NoExecute') {
    ctx.addIssue({ code: 'custom', path: ['tolerationSeconds'], message: 'only applies when effect is NoExecute' });
  }
  if (!toleration.key && toleration.operator !== 'Exists') {
    ctx.addIssue({ code: 'custom', path: ['operator'], message: 'must be Exists when key is empty' });
  }
});

export type Toleration = z.output<typeof tolerationSchema>;

// Kubernetes' own affinity types, strict so a typo fails here instead of at apply time; operators, keys and values
// are checked as the API server checks them, so a bad one fails before anything is created.
const NODE_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'] as const;
const LABEL_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

const selectorRequirement = (operators: readonly [string, ...string[]]) =>
  strict({
    key: labelKey('topology.kubernetes.io/zone').describe('The label the requirement is about.'),
    operator: z.enum(operators, { error: mustBe(...operators) }).describe(`One of ${operators.join(', ')}.`),
    values: z
      .array(z.string())
      .optional()
      .describe('The values: some for In and NotIn, none for Exists and DoesNotExist, one number for Gt and Lt.'),
  }).superRefine((requirement, ctx) => {
    const message = requirementValuesProblem(requirement.operator, requirement.values);
    if (message) ctx.addIssue({ code: 'custom', path: ['values'], message });
  });
const nodeFieldRequirement = strict({
  key: z.literal('metadata.name', { error: mustBe('metadata.name') }).describe('The node field: metadata.name.'),
  operator: z.enum(['In', 'NotIn'], { error: mustBe('In', 'NotIn') }).describe('In or NotIn.'),
  values: z.array(z.string()).length(1, 'must be exactly one node name').describe('One node name.'),
});
const nodeSelectorTerm = strict({
  matchExpressions: z
    .array(selectorRequirement(NODE_OPERATORS))
    .optional()
    .describe("Requirements on the node's labels."),
  matchFields: z.array(nodeFieldRequirement).optional().describe("Requirements on the node's fields (metadata.name)."),
});
const labelSelector = strict({
  matchLabels: labelMap('label selector').optional().describe('Labels that must all be set to these values.'),
  matchExpressions: z.array(selectorRequirement(LABEL_OPERATORS)).optional().describe('Requirements on the labels.'),
});
const podAffinityTerm = strict({
  labelSelector: labelSelector.optional().describe('The pods the term is about, by their labels.'),
  namespaceSelector: labelSelector.optional().describe('The namespaces of those pods, by their labels.'),
  namespaces: z
    .array(z.string())
    .optional()
    .describe("The namespaces of those pods, by name; with no namespaceSelector either: the model's namespace."),
  topologyKey: labelKey('topology.kubernetes.io/zone').describe(
    'The node label whose value says what is near, like topology.kubernetes.io/zone.',
  ),
  matchLabelKeys: z
    .array(z.string())
    .optional()
    .describe('Label keys whose values, taken from the pod being scheduled, the pods must match too.'),
  mismatchLabelKeys: z
    .array(z.string())
    .optional()
    .describe('Label keys whose values, taken from the pod being scheduled, the pods must not match.'),
});
const weight = int('a whole number from 1 to 100')
  .min(1)
  .max(100)
  .describe('How much the scheduler prefers this, from 1 to 100.');
const podAffinity = strict({
  requiredDuringSchedulingIgnoredDuringExecution: z
    .array(podAffinityTerm)
    .optional()
    .describe('Terms the scheduler must satisfy.'),
  preferredDuringSchedulingIgnoredDuringExecution: z
    .array(strict({ weight, podAffinityTerm: podAffinityTerm.describe('The preferred term.') }))
    .optional()
    .describe('Terms the scheduler prefers, by weight.'),
});
const affinitySchema = strict({
  nodeAffinity: strict({
    requiredDuringSchedulingIgnoredDuringExecution: strict({
      nodeSelectorTerms: z.array(nodeSelectorTerm).describe('Node terms; a node must match at least one.'),
    })
      .optional()
      .describe('The nodes the pods may be scheduled on.'),
    preferredDuringSchedulingIgnoredDuringExecution: z
      .array(strict({ weight, preference: nodeSelectorTerm.describe('The preferred node term.') }))
      .optional()
      .describe('Nodes the scheduler prefers, by weight.'),
  })
    .optional()
    .describe('Which nodes the pods run on, by their labels.'),
  podAffinity: podAffinity.optional().describe('Pods the pods are scheduled near.'),
  podAntiAffinity: podAffinity.optional().describe('Pods the pods are scheduled away from.'),
});

export type Affinity = z.output<typeof affinitySchema>;

const schedulingSchema = strict({
  nodeSelector: labelMap('node selector').default({}).describe('Labels a node must have to run the pods.'),
  tolerations: z.array(tolerationSchema).default([]).describe("Taints of nodes the pods tolerate, as in a pod's spec."),
  affinity: affinitySchema
    .nullable()
    .default(null)
    .describe("Kubernetes' affinity, as in a pod's spec: nodeAffinity, podAffinity, podAntiAffinity. null: none."),
  colocateReplicas: z
    .boolean({ error: 'must be true or false' })
    .default(true)
    .describe(
      'With a ReadWriteOnce volume, run every engine replica on the node of the others (a required pod affinity), since a replica on another node cannot mount the volume. false only if your storage attaches such a volume to several nodes.',
    ),
});

const pullerSchema = strict({
  image: imageRef
    .nullable()
    .default(null)
    .describe("The puller's image; null: the engine's image (it has python3 and huggingface_hub)."),
  deadline: duration('2h').default('2h').describe('A download still running after this long fails, like 2h.'),
  backoffLimit: int('a whole number of retries, 0 or more')
    .min(0, 'must be 0 or more')
    .default(2)
    .describe('How often a failed download is retried.'),
  env: envListSchema(pullerReserved).describe(
    "More environment variables of the puller's container, which downloads the weights and the adapters: HF_ENDPOINT for a Hub mirror, HTTPS_PROXY, HF_HUB_ETAG_TIMEOUT; not HF_TOKEN (source.huggingface.tokenSecret), HF_HUB_OFFLINE or FERRY_*.",
  ),
});

// ---------------------------------------------------------------------------------------------------------------
// The latency goal and the load baseline measured against it (docs/design/baseline.md)

const MAX_PROBE_CONCURRENCY = 4096;

const sloSchema = strict({
  ttft: duration('2s').describe('The time to first token each request must meet, like 2s or 500ms.'),
  itl: duration('100ms').describe(
    'The inter-token latency each request must meet: the time per output token after the first, like 100ms.',
  ),
  attainment: z
    .number({ error: 'must be a number above 0 and at most 1, like 0.95' })
    .gt(0, 'must be above 0 and at most 1, like 0.95')
    .max(1, 'must be above 0 and at most 1, like 0.95')
    .default(0.95)
    .describe('The share of requests that must meet both ttft and itl, above 0 and at most 1.'),
  workload: strict({
    promptTokens: int('a whole number of tokens from 1 to 1000000')
      .min(1, 'must be at least 1')
      .max(1_000_000, 'must be at most 1000000')
      .default(256)
      .describe("The prompt length of the measurement's requests, in tokens."),
    outputTokens: int('a whole number of tokens from 1 to 100000')
      .min(1, 'must be at least 1')
      .max(100_000, 'must be at most 100000')
      .default(128)
      .describe("The answer length of the measurement's requests, in tokens (the engine is told to ignore EOS)."),
  })
    .prefault({})
    .describe('The shape of the requests the measurement sends.'),
  maxConcurrency: int(`a whole number from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .min(1, `must be from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .max(MAX_PROBE_CONCURRENCY, `must be from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .default(256)
    .describe('The highest concurrency the measurement tries: the most requests it ever has in flight.'),
  admission: z
    .boolean({ error: 'must be true or false' })
    .default(true)
    .describe(
      'Above the measured concurrency, each replica answers HTTP 429 with Retry-After instead of queueing (an nginx sidecar in front of the engine). false: measure only.',
    ),
});

export type SloSpec = z.output<typeof sloSchema>;

// ---------------------------------------------------------------------------------------------------------------
// The model as a Gateway API Inference Extension pool (docs/design/baseline.md, section 6)

const FAILURE_MODES = ['FailClose', 'FailOpen'] as const;

const inferencePoolSchema = strict({
  endpointPicker: strict({
    name: dnsLabel('Service name', 'epp').describe(
      "The Service of the endpoint picker (the Inference Extension's EPP) that picks this pool's endpoints, in the model's namespace. Yours: Ferry does not run it.",
    ),
    port: int('a port number from 1 to 65535')
      .min(1, 'must be from 1 to 65535')
      .max(65535, 'must be from 1 to 65535')
      .default(9002)
      .describe("The picker's ext-proc port."),
    failureMode: z
      .enum(FAILURE_MODES, { error: mustBe(...FAILURE_MODES) })
      .default('FailClose')
      .describe('What the gateway does when the picker does not answer: FailClose (refuse) or FailOpen (pick any).'),
  }).describe("The endpoint picker the gateway asks for each request's endpoint."),
});

export type InferencePoolSpec = z.output<typeof inferencePoolSchema>;

// ---------------------------------------------------------------------------------------------------------------
// The document

const specSchema = strict({
  cluster: dnsLabel('cluster name (it picks the worker and task queue)', 'default')
    .default(DEFAULT_CLUSTER)
    .describe('The cluster whose worker serves the model (task queue ferry-<cluster>). Cannot change later.'),
  source: sourceSchema.describe('Where the weights come from: exactly one of huggingface or pvc.'),
  engine: engineSchema.prefault({}).describe('The vLLM engine: its image, arguments, environment and API key.'),
  resources: resourcesSchema.prefault({}).describe('What each engine pod asks for.'),
  storage: storageSchema
    .prefault({})
    .describe("The model's own volume, <name>-weights, which holds the weights the engine reads."),
  scheduling: schedulingSchema
    .prefault({})
    .describe('Where the engine and the puller may run (both get the same, so the volume binds where they run).'),
  replicas: int('a whole number of replicas, 0 or more')
    .min(0, 'must be 0 or more')
    .default(1)
    .describe('Engine pods; 0 keeps the volume, the weights and the Service but stops the engine.'),
  puller: pullerSchema.prefault({}).describe('The Job that downloads or copies the weights into the volume.'),
  slo: sloSchema
    .optional()
    .describe(
      'A latency goal: Ferry measures the highest concurrency at which one replica meets it and records it in status.baseline. Unset: nothing is measured.',
    ),
  inferencePool: inferencePoolSchema
    .optional()
    .describe(
      "Also register the engine pods as an InferencePool <name> (inference.networking.k8s.io/v1, the Gateway API Inference Extension), so an inference gateway routes to them; its endpoints are each pod's admission port when slo.admission is on. The cluster must have the extension's CRDs. Unset: no pool.",
    ),
});

const documentSchema = strict({
  apiVersion: z.literal(API_VERSION, { error: mustBe(API_VERSION) }).describe('The version of the document format.'),
  kind: z.literal(KIND, { error: mustBe(KIND) }).describe('The kind of document.'),
  metadata: strict({
    name: modelName.describe(
      'The name of the model: a DNS-1035 label (it names the Service), not "vllm". Cannot change later.',
    ),
    namespace: dnsLabel('namespace name', 'models')
      .default('default')
      .describe("The namespace of the model's Kubernetes objects. Cannot change later."),
    labels: labelMap('label')
      .default({})
      .describe("Labels added to every object Ferry creates; Ferry's own labels win on conflict."),
  }).describe('The name and namespace identify the model (and its workflow).'),
  spec: specSchema.describe('What to serve, and how.'),
});

type Document = z.output<typeof documentSchema>;

// Rules that span fields. zod runs them even after field-level issues that are not type errors, so every value
// read here may still be out of range: treat them defensively.
function crossFieldIssues(doc: Document, ctx: z.core.$RefinementCtx<Document>): void {
  const { metadata, spec } = doc;
  const memory = parseQuantity(spec.resources.memory);
  const shm = parseQuantity(spec.resources.shmSize);
  if (memory !== undefined && shm !== undefined && shm >= memory) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'resources', 'shmSize'],
      message: `must be smaller than resources.memory (${spec.resources.memory}): the memory-backed /dev/shm counts against the container's memory limit`,
    });
  }
  if (spec.source.pvc && spec.source.pvc.claimName === `${metadata.name}-weights`) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'source', 'pvc', 'claimName'],
      message: `must not be ${metadata.name}-weights: that is the model's own volume, which the weights are copied into`,
    });
  }
  const { lora } = spec.engine;
  if (lora.adapters !== undefined && !lora.enabled) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'engine', 'lora', 'adapters'],
      message: 'needs engine.lora.enabled: true (the engine serves adapters only with LoRA enabled)',
    });
  }
  if (lora.adapters?.length && spec.storage.accessMode === 'ReadWriteOncePod') {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'engine', 'lora', 'adapters'],
      message:
        "cannot be used with storage.accessMode ReadWriteOncePod: only the engine's pod can mount the volume, so nothing can put an adapter's files on it while the engine serves; use ReadWriteOnce or ReadWriteMany",
    });
  }
  const baseName = spec.engine.servedModelName ?? metadata.name;
  (lora.adapters ?? []).forEach((adapter, index) => {
    if (adapter.name === baseName) {
      ctx.addIssue({
        code: 'custom',
        path: ['spec', 'engine', 'lora', 'adapters', index, 'name'],
        message: `must differ from the base model's served name ${quote(baseName)}: requests name the adapter or the base by it`,
      });
    }
    if (adapter.source.pvc?.claimName === `${metadata.name}-weights`) {
      ctx.addIssue({
        code: 'custom',
        path: ['spec', 'engine', 'lora', 'adapters', index, 'source', 'pvc', 'claimName'],
        message: `must not be ${metadata.name}-weights: that is the model's own volume, which the adapters are copied into`,
      });
    }
  });
  if (spec.storage.accessMode === 'ReadWriteOncePod' && spec.replicas > 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'replicas'],
      message: 'must be 0 or 1 with storage.accessMode ReadWriteOncePod: only one pod can mount the volume',
    });
  }
}

function withDefaults(doc: Document) {
  const { image, servedModelName, ...engine } = doc.spec.engine;
  return {
    ...doc,
    spec: { ...doc.spec, engine: { image, servedModelName: servedModelName ?? doc.metadata.name, ...engine } },
  };
}

/** The ServedModel document: validates, rejects unknown keys at every level and fills every default. */
export const servedModelSchema = documentSchema.superRefine(crossFieldIssues).transform(withDefaults);

/** A document as people write it: everything with a default is optional. */
export type ServedModelInput = z.input<typeof servedModelSchema>;
/** A validated document with every default filled in. Valid input itself: parsing it again returns it unchanged. */
export type ServedModel = z.output<typeof servedModelSchema>;
export type ServedModelSpec = ServedModel['spec'];
export type EngineSpec = ServedModelSpec['engine'];
export type ResourcesSpec = ServedModelSpec['resources'];
export type StorageSpec = ServedModelSpec['storage'];
export type SchedulingSpec = ServedModelSpec['scheduling'];
export type PullerSpec = ServedModelSpec['puller'];
export type SecretKeyRef = NonNullable<EngineSpec['apiKeySecret']>;
