import { z } from 'zod';

// The ServedModel document: the one contract between people, clients, the workflow and the builders.
// Pure (no Node, no Kubernetes client): it is bundled into workflow code.

export const API_VERSION = 'ferry.dev/v1alpha1';
export const KIND = 'ServedModel';
export const DEFAULT_ENGINE_IMAGE = 'vllm/vllm-openai:v0.11.0';

/** One problem in a document: where (`spec.storage.size`) and what is expected. */
export interface SpecIssue {
  path: string;
  message: string;
}

/** Thrown by `parseServedModel`/`specForUpdate`; `message` has one line per issue. */
export class SpecError extends Error {
  override readonly name = 'SpecError';
  readonly issues: SpecIssue[];

  constructor(issues: SpecIssue[]) {
    super(formatSpecIssues(issues));
    this.issues = issues;
  }
}

/** One line per problem: `spec.storage.size: must be a positive quantity like 50Gi, got "lots"`. */
export function formatSpecIssues(issues: readonly SpecIssue[]): string {
  return issues.map((issue) => `${issue.path}: ${issue.message}`).join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// Durations and quantities

const DURATION_UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_WHOLE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/** Parses `90s`, `40m`, `2h`, `1h30m`, `500ms`, `1d` into milliseconds; throws on anything else. */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (!DURATION_WHOLE.test(trimmed)) {
    throw new Error(`invalid duration ${JSON.stringify(text)}: write a number and a unit, like 90s, 40m, 2h or 1h30m`);
  }
  let ms = 0;
  for (const [, amount, unit] of trimmed.matchAll(DURATION_PART)) {
    ms += Number(amount) * (DURATION_UNIT_MS[unit!] ?? 0);
  }
  return Math.round(ms);
}

/** A duration in whole seconds, rounded up (Kubernetes fields such as `activeDeadlineSeconds`). */
export function durationSeconds(text: string): number {
  return Math.ceil(parseDuration(text) / 1000);
}

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/;
const QUANTITY_SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The value of a Kubernetes quantity (`50Gi`, `500m`, `4`, `1e3`) in base units, or undefined if malformed. */
export function parseQuantity(text: string): number | undefined {
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, amount, suffix] = match;
  const factor = suffix === undefined ? 1 : (QUANTITY_SUFFIX[suffix] ?? 10 ** Number(suffix.slice(1)));
  return Number(amount) * factor;
}

// ---------------------------------------------------------------------------------------------------------------
// Building blocks. Each rule returns a message for people, or undefined when the value is fine.

type Rule<T> = (value: T) => string | undefined;

function rules<S extends z.ZodType>(schema: S, ...checks: Rule<z.output<S>>[]): S {
  return schema.superRefine((value, ctx) => {
    for (const check of checks) {
      const message = check(value);
      if (message) {
        ctx.addIssue({ code: 'custom', message });
        return;
      }
    }
  });
}

const quote = (value: unknown): string => JSON.stringify(value);

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return quote(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  return String(value);
}

/** An error function for literals and enums: `must be one of A, B, got "C"`, or `is required (A)`. */
function mustBe(...allowed: string[]) {
  const expected = allowed.length === 1 ? allowed[0] : `one of ${allowed.join(', ')}`;
  return (issue: { input?: unknown }) =>
    issue.input === undefined ? `is required (${expected})` : `must be ${expected}, got ${describeValue(issue.input)}`;
}

function unknownFieldMessage(key: string, known: readonly string[]): string {
  const close = known.find((candidate) => {
    const distance = editDistance(candidate.toLowerCase(), key.toLowerCase());
    return distance <= 2 && distance < key.length / 2;
  });
  const hint = close ? `did you mean ${quote(close)}? ` : '';
  return `unknown field; ${hint}fields allowed here: ${known.join(', ')}`;
}

// An object that rejects unknown keys. zod reports all unknown keys of one object as one issue; the messages are
// joined by newlines here and split per key in `toSpecIssues`, so each key gets its own path and hint.
function strict<T extends z.core.$ZodLooseShape>(shape: T) {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((key) => unknownFieldMessage(key, known)).join('\n')
        : undefined,
  });
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const C_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const HF_REPO = /^(?:[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?\/)?[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?$/;

function isSubdomain(value: string): boolean {
  return value.length <= 253 && DNS1123_SUBDOMAIN.test(value);
}

/** A Kubernetes qualified name (`team`, `example.com/team`): label keys, toleration keys, resource names. */
function qualifiedNameProblem(value: string, requirePrefix = false): string | undefined {
  const slash = value.lastIndexOf('/');
  const prefix = slash >= 0 ? value.slice(0, slash) : undefined;
  const name = slash >= 0 ? value.slice(slash + 1) : value;
  if (requirePrefix && prefix === undefined) return 'needs a domain prefix';
  if (prefix !== undefined && !isSubdomain(prefix)) return `its prefix ${quote(prefix)} is not a DNS subdomain`;
  if (name.length === 0 || name.length > 63 || !LABEL_NAME_PART.test(name)) {
    return 'its name part must be 1-63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
  }
  return undefined;
}

function labelValueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !LABEL_NAME_PART.test(value)) {
    return 'must be at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
  }
  return undefined;
}

const labelMap = (what: string) =>
  z.record(z.string(), z.string()).superRefine((labels, ctx) => {
    for (const [key, value] of Object.entries(labels)) {
      const keyProblem = qualifiedNameProblem(key);
      if (keyProblem) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `${quote(key)} is not a valid ${what} key: ${keyProblem}`,
        });
      }
      const valueProblem = labelValueProblem(value);
      if (valueProblem) ctx.addIssue({ code: 'custom', path: [key], message: `${what} value ${valueProblem}` });
    }
  });

const modelName = rules(
  z.string(),
  (v) => (v.length === 0 ? 'must not be empty' : undefined),
  (v) => (v.length > 63 ? `must be at most 63 characters (it names a Kubernetes Service), got ${v.length}` : undefined),
  (v) =>
    DNS1035_LABEL.test(v)
      ? undefined
      : `must be a DNS-1035 label: lowercase letters, digits and "-", starting with a letter and ending with a letter or digit (like qwen-7b), got ${quote(v)}`,
  (v) =>
    v === 'vllm'
      ? 'must not be "vllm": a Service named vllm injects VLLM_* variables into pods that collide with vLLM\'s own settings; pick another name'
      : undefined,
);

const dnsLabel = (what: string, example: string) =>
  rules(z.string(), (v) =>
    v.length <= 63 && DNS1123_LABEL.test(v)
      ? undefined
      : `must be a ${what}: at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit (like ${example}), got ${quote(v)}`,
  );

const objectName = (what: string, example: string) =>
  rules(z.string(), (v) =>
    isSubdomain(v)
      ? undefined
      : `must be the name of a ${what}: lowercase letters, digits, "-" and ".", like ${example}, got ${quote(v)}`,
  );

const secretRef = (example: string) =>
  strict({
    name: objectName('Secret', example),
    key: rules(z.string(), (v) =>
      v.length > 0 && v.length <= 253 && SECRET_KEY.test(v)
        ? undefined
        : `must be a key of the Secret (letters, digits, "-", "_" or "."), got ${quote(v)}`,
    ).default('token'),
  });

const quantity = (example: string) =>
  z
    .union([z.string(), z.number()], {
      error: (issue) => `must be a positive quantity like ${example}, got ${describeValue(issue.input)}`,
    })
    .transform((v) => String(v))
    .pipe(
      rules(z.string(), (v) => {
        const value = parseQuantity(v);
        return value !== undefined && value > 0
          ? undefined
          : `must be a positive quantity like ${example}, got ${quote(v)}`;
      }),
    );

const duration = (example: string) =>
  rules(z.string({ error: `must be a duration like ${example}` }), (v) => {
    let ms: number;
    try {
      ms = parseDuration(v);
    } catch {
      return `must be a duration like 90s, 40m, 2h or 1h30m, got ${quote(v)}`;
    }
    return ms > 0 ? undefined : `must be a positive duration like ${example}, got ${quote(v)}`;
  });

const imageRef = rules(z.string(), (v) =>
  v.length > 0 && !/\s/.test(v) ? undefined : `must be a container image like ${DEFAULT_ENGINE_IMAGE}, got ${quote(v)}`,
);

const int = (what: string) => z.number({ error: `must be ${what}` }).int(`must be ${what}`);

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
  ),
  revision: rules(z.string(), (v) =>
    v.length > 0 && v.length <= 255 && /^[\w./-]+$/.test(v)
      ? undefined
      : `must be a branch, tag or commit of the repository (like main or a commit sha), got ${quote(v)}`,
  ).default('main'),
  tokenSecret: secretRef('hf-token').optional(),
});

const pvcSourceSchema = strict({
  claimName: objectName('PersistentVolumeClaim in the same namespace', 'checkpoints'),
  path: rules(z.string(), (v) => {
    if (v === '') return undefined;
    if (v.startsWith('/')) return `must be relative to the root of the claim, like run-42/step-1000, got ${quote(v)}`;
    const parts = v.split('/');
    return parts.some((part) => part === '' || part === '.' || part === '..' || part.includes('\0'))
      ? `must be a plain relative path without empty, "." or ".." parts, like run-42/step-1000, got ${quote(v)}`
      : undefined;
  }).default(''),
});

export type HuggingFaceSource = z.output<typeof huggingFaceSchema>;
export type PvcSource = z.output<typeof pvcSourceSchema>;
/** Exactly one of `huggingface` or `pvc`. */
export type SourceSpec =
  { huggingface: HuggingFaceSource; pvc?: undefined } | { pvc: PvcSource; huggingface?: undefined };

const sourceSchema = strict({ huggingface: huggingFaceSchema.optional(), pvc: pvcSourceSchema.optional() })
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

const envVarSchema = strict({
  name: rules(
    z.string(),
    (v) =>
      C_IDENTIFIER.test(v)
        ? undefined
        : `must be a variable name of letters, digits and "_", not starting with a digit, got ${quote(v)}`,
    (v) => (RESERVED_ENV[v] ? `${v} ${RESERVED_ENV[v]}` : undefined),
  ),
  value: z
    .union([z.string(), z.number(), z.boolean()], { error: 'must be a string (quote numbers and booleans)' })
    .transform((v) => String(v))
    .optional(),
  valueFrom: strict({
    secretKeyRef: strict({ name: objectName('Secret', 'my-secret'), key: z.string().min(1, 'must not be empty') }),
  }).optional(),
}).superRefine((env, ctx) => {
  if (env.value !== undefined && env.valueFrom !== undefined) {
    ctx.addIssue({ code: 'custom', message: 'give either value or valueFrom, not both' });
  }
});

export type EnvVar = z.output<typeof envVarSchema>;

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
  // argparse also accepts unambiguous prefixes: --api-k=... is still --api-key.
  const canonical = /^--api-k(e|ey)?$/.test(normalized) ? '--api-key' : normalized;
  const reason = FERRY_FLAGS[canonical];
  return reason ? `${canonical} ${reason}` : undefined;
}

const engineSchema = strict({
  image: imageRef.default(DEFAULT_ENGINE_IMAGE),
  servedModelName: rules(z.string(), (v) =>
    v.length > 0 && v.length <= 256 && !/\s/.test(v) && !v.startsWith('-')
      ? undefined
      : `must be a model name without spaces, not starting with "-" (like qwen or Qwen/Qwen2.5-0.5B-Instruct), got ${quote(v)}`,
  ).optional(),
  port: int('a port number from 1 to 65535')
    .min(1, 'must be a port number from 1 to 65535')
    .max(65535, 'must be a port number from 1 to 65535')
    .default(8000),
  args: z
    .array(z.string({ error: 'must be a string (quote numbers, e.g. "--max-model-len=4096")' }))
    .superRefine((args, ctx) => {
      args.forEach((arg, index) => {
        const message = argProblem(arg);
        if (message) ctx.addIssue({ code: 'custom', path: [index], message });
      });
    })
    .default([]),
  env: z
    .array(envVarSchema)
    .superRefine((env, ctx) => {
      const seen = new Set<string>();
      env.forEach((variable, index) => {
        if (seen.has(variable.name)) {
          ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `${variable.name} is listed twice` });
        }
        seen.add(variable.name);
      });
    })
    .default([]),
  apiKeySecret: secretRef('qwen-api-key').optional(),
  lora: strict({
    enabled: z.boolean({ error: 'must be true or false' }).default(false),
    maxLoras: int('a whole number of adapters, at least 1').min(1, 'must be at least 1').default(4),
  }).prefault({}),
  startupTimeout: duration('40m').default('40m'),
});

// ---------------------------------------------------------------------------------------------------------------
// Resources, storage, scheduling, puller

const resourcesSchema = strict({
  gpus: int('a whole number of GPUs, 0 or more').min(0, 'must be 0 or more').default(1),
  gpuResource: rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v, true);
    return problem
      ? `must be an extended resource name with a domain, like nvidia.com/gpu or amd.com/gpu, got ${quote(v)} (${problem})`
      : undefined;
  }).default('nvidia.com/gpu'),
  // Sized to fit the smallest common GPU nodes (4 vCPU, 16 GiB); raise them for big models.
  cpu: quantity('4 or 500m').default('2'),
  memory: quantity('32Gi').default('12Gi'),
  shmSize: quantity('8Gi').default('2Gi'),
});

const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteOncePod', 'ReadWriteMany'] as const;

const storageSchema = strict({
  size: quantity('50Gi').default('50Gi'),
  storageClassName: rules(z.string(), (v) =>
    v === '' || isSubdomain(v)
      ? undefined
      : `must be the name of a StorageClass, or null for the cluster's default class, got ${quote(v)}`,
  )
    .nullable()
    .default(null),
  accessMode: z.enum(ACCESS_MODES, { error: mustBe(...ACCESS_MODES) }).default('ReadWriteOnce'),
  retainOnDelete: z.boolean({ error: 'must be true or false' }).default(false),
});

const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;

const tolerationSchema = strict({
  key: rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v);
    return problem ? `must be a taint key like nvidia.com/gpu, got ${quote(v)} (${problem})` : undefined;
  }).optional(),
  operator: z.enum(['Exists', 'Equal'], { error: mustBe('Exists', 'Equal') }).optional(),
  value: z.string().optional(),
  effect: z.enum(TAINT_EFFECTS, { error: mustBe(...TAINT_EFFECTS) }).optional(),
  tolerationSeconds: int('a whole number of seconds').optional(),
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

// Kubernetes' own affinity types, strict so a typo fails here instead of at apply time.
const selectorRequirement = strict({
  key: z.string(),
  operator: z.string(),
  values: z.array(z.string()).optional(),
});
const nodeSelectorTerm = strict({
  matchExpressions: z.array(selectorRequirement).optional(),
  matchFields: z.array(selectorRequirement).optional(),
});
const labelSelector = strict({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z.array(selectorRequirement).optional(),
});
const podAffinityTerm = strict({
  labelSelector: labelSelector.optional(),
  namespaceSelector: labelSelector.optional(),
  namespaces: z.array(z.string()).optional(),
  topologyKey: z.string(),
  matchLabelKeys: z.array(z.string()).optional(),
  mismatchLabelKeys: z.array(z.string()).optional(),
});
const weight = int('a whole number from 1 to 100').min(1).max(100);
const podAffinity = strict({
  requiredDuringSchedulingIgnoredDuringExecution: z.array(podAffinityTerm).optional(),
  preferredDuringSchedulingIgnoredDuringExecution: z
    .array(strict({ weight, podAffinityTerm: podAffinityTerm }))
    .optional(),
});
const affinitySchema = strict({
  nodeAffinity: strict({
    requiredDuringSchedulingIgnoredDuringExecution: strict({ nodeSelectorTerms: z.array(nodeSelectorTerm) }).optional(),
    preferredDuringSchedulingIgnoredDuringExecution: z
      .array(strict({ weight, preference: nodeSelectorTerm }))
      .optional(),
  }).optional(),
  podAffinity: podAffinity.optional(),
  podAntiAffinity: podAffinity.optional(),
});

export type Affinity = z.output<typeof affinitySchema>;

const schedulingSchema = strict({
  nodeSelector: labelMap('node selector').default({}),
  tolerations: z.array(tolerationSchema).default([]),
  affinity: affinitySchema.nullable().default(null),
});

const pullerSchema = strict({
  image: imageRef.nullable().default(null),
  deadline: duration('2h').default('2h'),
  backoffLimit: int('a whole number of retries, 0 or more').min(0, 'must be 0 or more').default(2),
});

// ---------------------------------------------------------------------------------------------------------------
// The document

const specSchema = strict({
  cluster: dnsLabel('cluster name (it picks the worker and task queue)', 'default').default('default'),
  source: sourceSchema,
  engine: engineSchema.prefault({}),
  resources: resourcesSchema.prefault({}),
  storage: storageSchema.prefault({}),
  scheduling: schedulingSchema.prefault({}),
  replicas: int('a whole number of replicas, 0 or more').min(0, 'must be 0 or more').default(1),
  puller: pullerSchema.prefault({}),
});

const documentSchema = strict({
  apiVersion: z.literal(API_VERSION, { error: mustBe(API_VERSION) }),
  kind: z.literal(KIND, { error: mustBe(KIND) }),
  metadata: strict({
    name: modelName,
    namespace: dnsLabel('namespace name', 'models').default('default'),
    labels: labelMap('label').default({}),
  }),
  spec: specSchema,
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

// ---------------------------------------------------------------------------------------------------------------
// Parsing and issues

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment))
      out += out ? `.${segment}` : segment;
    else out += `[${quote(String(segment))}]`;
  }
  return out || '(document)';
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'an object (a mapping of fields)',
  array: 'a list',
  record: 'a mapping of names to values',
};

// Messages for issues no schema above words itself: missing fields, wrong types, bounds.
const fallbackMessages: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${EXPECTED[issue.expected] ?? issue.expected}, got ${describeValue(issue.input)}`;
    case 'too_small':
      return issue.origin === 'array'
        ? `must have at least ${issue.minimum} item(s)`
        : `must be at least ${issue.minimum}`;
    case 'too_big':
      return issue.origin === 'array'
        ? `must have at most ${issue.maximum} item(s)`
        : `must be at most ${issue.maximum}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => String(v)).join(', ')}, got ${describeValue(issue.input)}`;
    default:
      return undefined;
  }
};

/** Turns zod's issues into Ferry's: one per problem (and per unknown key), with a dotted path. */
export function toSpecIssues(error: z.ZodError): SpecIssue[] {
  const issues: SpecIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const messages = issue.message.split('\n');
      issue.keys.forEach((key, index) => {
        issues.push({ path: formatPath([...issue.path, key]), message: messages[index] ?? messages[0]! });
      });
    } else {
      issues.push({ path: formatPath(issue.path), message: issue.message });
    }
  }
  return issues;
}

/** Validates without throwing: the model, or the list of issues. */
export function safeParseServedModel(
  doc: unknown,
): { ok: true; model: ServedModel } | { ok: false; issues: SpecIssue[] } {
  const result = servedModelSchema.safeParse(doc, { error: fallbackMessages });
  return result.success ? { ok: true, model: result.data } : { ok: false, issues: toSpecIssues(result.error) };
}

/** Validates a document and fills defaults; throws `SpecError` listing every problem. */
export function parseServedModel(doc: unknown): ServedModel {
  const result = safeParseServedModel(doc);
  if (!result.ok) throw new SpecError(result.issues);
  return result.model;
}

// ---------------------------------------------------------------------------------------------------------------
// Updates

const IMMUTABLE: { path: string; get: (m: ServedModel) => unknown; why: string }[] = [
  { path: 'metadata.name', get: (m) => m.metadata.name, why: 'it is the identity of the model' },
  { path: 'metadata.namespace', get: (m) => m.metadata.namespace, why: 'it is the identity of the model' },
  { path: 'spec.cluster', get: (m) => m.spec.cluster, why: 'the model is served by that cluster’s worker' },
  {
    path: 'spec.storage.storageClassName',
    get: (m) => m.spec.storage.storageClassName,
    why: 'Kubernetes cannot change the class of an existing volume',
  },
  {
    path: 'spec.storage.accessMode',
    get: (m) => m.spec.storage.accessMode,
    why: 'Kubernetes cannot change the access mode of an existing volume',
  },
];

/** Paths of fields that cannot change on a running model (a shrinking `spec.storage.size` counts: volumes only grow). */
export function immutableChanges(old: ServedModel, next: ServedModel): string[] {
  const changed = IMMUTABLE.filter((field) => field.get(old) !== field.get(next)).map((field) => field.path);
  const oldSize = parseQuantity(old.spec.storage.size);
  const nextSize = parseQuantity(next.spec.storage.size);
  if (oldSize !== undefined && nextSize !== undefined && nextSize < oldSize) changed.push('spec.storage.size');
  return changed;
}

/** Validates `doc` as the next spec of the running model `current`; throws `SpecError` on any problem. */
export function specForUpdate(current: ServedModel, doc: unknown): ServedModel {
  const next = parseServedModel(doc);
  const issues = immutableChanges(current, next).map((path): SpecIssue => {
    if (path === 'spec.storage.size') {
      return {
        path,
        message: `cannot shrink from ${current.spec.storage.size} to ${next.spec.storage.size}: volumes only grow`,
      };
    }
    const field = IMMUTABLE.find((f) => f.path === path)!;
    return {
      path,
      message: `cannot change from ${quote(field.get(current))} to ${quote(field.get(next))}: ${field.why}; delete the model and serve it again instead`,
    };
  });
  if (issues.length > 0) throw new SpecError(issues);
  return next;
}

// ---------------------------------------------------------------------------------------------------------------
// Source identity (what decides whether weights must be pulled again)

/** The part of a source that identifies the weights. The token Secret is not part of it: rotating it must not re-pull. */
export type SourceIdentity =
  { kind: 'huggingface'; repo: string; revision: string } | { kind: 'pvc'; claimName: string; path: string };

export function sourceIdentity(source: SourceSpec): SourceIdentity {
  if (source.huggingface) {
    return { kind: 'huggingface', repo: source.huggingface.repo, revision: source.huggingface.revision };
  }
  return { kind: 'pvc', claimName: source.pvc.claimName, path: source.pvc.path };
}

/** True when both sources name the same weights (so an update needs no new download). */
export function sameSource(a: SourceSpec, b: SourceSpec): boolean {
  const x = sourceIdentity(a);
  const y = sourceIdentity(b);
  return x.kind === 'huggingface' && y.kind === 'huggingface'
    ? x.repo === y.repo && x.revision === y.revision
    : x.kind === 'pvc' && y.kind === 'pvc' && x.claimName === y.claimName && x.path === y.path;
}

/** `huggingface:Qwen/Qwen2.5-0.5B-Instruct@main` or `pvc:checkpoints/run-42/step-1000`; never contains a secret. */
export function describeSource(source: SourceSpec): string {
  const identity = sourceIdentity(source);
  return identity.kind === 'huggingface'
    ? `huggingface:${identity.repo}@${identity.revision}`
    : `pvc:${identity.claimName}${identity.path ? `/${identity.path}` : ''}`;
}

/** The in-cluster URL of the model's Service (named like the model): `http://qwen.models.svc:8000`. */
export function endpointOf(model: ServedModel): string {
  return `http://${model.metadata.name}.${model.metadata.namespace}.svc:${model.spec.engine.port}`;
}
