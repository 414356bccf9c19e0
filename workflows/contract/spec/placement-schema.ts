// Where and with what each engine pod runs: resources, the model's volume, scheduling (tolerations, affinity), and
// the puller Job that fills the volume. Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import { envListSchema, imageRef, type ReservedEnv } from './engine-schema.js';
import { withFieldRules } from './field-rules.js';
import {
  duration,
  int,
  labelKey,
  labelMap,
  mustBe,
  qualifiedNameProblem,
  qualifiedNameRule,
  quantity,
  quote,
  requirementValuesJson,
  requirementValuesProblem,
  rules,
  storageClassRule,
  strict,
} from './rules.js';

export const resourcesSchema = strict({
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
    .meta(qualifiedNameRule(true))
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
const CACHE_MODES = ['none', 'shared'] as const;

export const storageSchema = strict({
  size: quantity('50Gi')
    .default('50Gi')
    .describe('The size of the volume: it holds old and new weights while a new source is pulled. It can only grow.'),
  storageClassName: rules(z.string(), (v) =>
    storageClassRule.test(v)
      ? undefined
      : `must be the name of a StorageClass, or null for the cluster's default class, got ${quote(v)}`,
  )
    .meta(storageClassRule.json)
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
  // No default: a spec accepted before the field existed parses as it did.
  cache: z
    .enum(CACHE_MODES, { error: mustBe(...CACHE_MODES) })
    .optional()
    .describe(
      "shared: the models of the namespace that read the same source through the same Secret share one volume, ferry-cache-<key>, which one puller Job fills once; size, class and access mode are those of the first model, and the last model deleted deletes it unless it retains its volume. With ReadWriteOnce every pod of those models runs on one node. Not yet with LoRA adapters, ReadWriteOncePod or a BlueGreen or Canary rollout; the source cannot change while the model runs. Unset or none: a volume of the model's own. Cannot change later.",
    ),
});

const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;

const tolerationFields = strict({
  key: rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v);
    return problem ? `must be a taint key like nvidia.com/gpu, got ${quote(v)} (${problem})` : undefined;
  })
    .meta(qualifiedNameRule())
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
});

// As Kubernetes checks a toleration's fields against each other.
const tolerationSchema = withFieldRules(tolerationFields, [
  {
    when: { field: 'operator', is: 'Exists' },
    then: { field: 'value', is: '', orUnset: true },
    at: 'value',
    message: 'must be empty when operator is Exists',
  },
  {
    when: { field: 'tolerationSeconds', set: true },
    then: { field: 'effect', is: 'NoExecute' },
    at: 'tolerationSeconds',
    message: 'only applies when effect is NoExecute',
  },
  {
    when: { field: 'key', is: '', orUnset: true },
    then: { field: 'operator', is: 'Exists' },
    at: 'operator',
    message: 'must be Exists when key is empty',
  },
]);

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
  })
    .superRefine((requirement, ctx) => {
      const message = requirementValuesProblem(requirement.operator, requirement.values);
      if (message) ctx.addIssue({ code: 'custom', path: ['values'], message });
    })
    .meta(requirementValuesJson(operators));
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

export const schedulingSchema = strict({
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

// Variables Ferry sets in the puller's container (the weight and adapter downloads).
const PULLER_RESERVED: ReservedEnv = {
  names: {
    HF_TOKEN: 'comes only from source.huggingface.tokenSecret',
    HF_HUB_OFFLINE: 'would stop the download: the puller is the one that reaches the Hub',
  },
  prefixes: { FERRY_: "is a name of the puller program's own settings, which Ferry sets" },
};

export const pullerSchema = strict({
  image: imageRef
    .nullable()
    .default(null)
    .describe("The puller's image; null: the engine's image (it has python3 and huggingface_hub)."),
  deadline: duration('2h').default('2h').describe('A download still running after this long fails, like 2h.'),
  backoffLimit: int('a whole number of retries, 0 or more')
    .min(0, 'must be 0 or more')
    .default(2)
    .describe('How often a failed download is retried.'),
  env: envListSchema(PULLER_RESERVED).describe(
    "More environment variables of the puller's container, which downloads the weights and the adapters: HF_ENDPOINT for a Hub mirror, HTTPS_PROXY, HF_HUB_ETAG_TIMEOUT; not HF_TOKEN (source.huggingface.tokenSecret), HF_HUB_OFFLINE or FERRY_*.",
  ),
});
