// The ServedModel document: the one contract between people, clients, the workflow and the builders.
// Pure (no Node, no Kubernetes client): it is bundled into workflow code.
import { z } from 'zod';
import { DEFAULT_CLUSTER } from '../identity.js';
import { parseQuantity } from './quantities.js';
import {
  C_IDENTIFIER,
  dnsLabel,
  duration,
  HF_REPO,
  int,
  isSubdomain,
  labelMap,
  modelName,
  mustBe,
  objectName,
  qualifiedNameProblem,
  quantity,
  quote,
  rules,
  secretRef,
  strict,
} from './rules.js';

export const API_VERSION = 'ferry.dev/v1alpha1';
export const KIND = 'ServedModel';
export const DEFAULT_ENGINE_IMAGE = 'vllm/vllm-openai:v0.11.0';

const imageRef = rules(z.string(), (v) =>
  v.length > 0 && !/\s/.test(v) ? undefined : `must be a container image like ${DEFAULT_ENGINE_IMAGE}, got ${quote(v)}`,
);

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
  cluster: dnsLabel('cluster name (it picks the worker and task queue)', 'default').default(DEFAULT_CLUSTER),
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
