// The ServedModel document: the one contract between people, clients, the workflow and the builders; its parts are in
// the *-schema.ts files beside it. Pure (no Node, no Kubernetes client): it is bundled into workflow code.
import { z } from 'zod';
import { DEFAULT_CLUSTER } from '../identity.js';
import { clusterPlacementSchema } from './cluster-placement-schema.js';
import { engineSchema } from './engine-schema.js';
import { frontSchema } from './front-schema.js';
import { pullerSchema, resourcesSchema, schedulingSchema, storageSchema } from './placement-schema.js';
import { withFieldRules } from './field-rules.js';
import { parserOnly } from './parser-only.js';
import { parseDuration, parseQuantity } from './quantities.js';
import { dnsLabel, int, labelMap, modelName, mustBe, quote, strict } from './rules.js';
import { expiresAtSchema, MIN_IDLE_TO_ZERO_MS, scalingSchema } from './scaling-schema.js';
import { inferencePoolSchema, sloSchema } from './slo-schema.js';
import { rolloutIssues, rolloutSchema } from './rollout-schema.js';
import { sourceSchema } from './source-schema.js';

export { asAcceptedBefore, asAcceptedBeforeBounds } from './accepted-before.js';
export { MAX_PLACEMENT_CLUSTERS, type ClusterPlacement } from './cluster-placement-schema.js';
export { DEFAULT_ENGINE_IMAGE, type AdapterSpec, type EnvVar } from './engine-schema.js';
export { type Affinity, type Toleration } from './placement-schema.js';
export { type InferencePoolSpec, type SloSpec } from './slo-schema.js';
export { scheduledFloor, type ScheduledFloor, type ScheduleWindow } from './schedule.js';
export {
  expiredProblem,
  scalingPolicy,
  startingReplicas,
  type ScalingPolicy,
  type ScalingSpec,
} from './scaling-schema.js';
export {
  type HuggingFaceSource,
  type OciSource,
  type PvcSource,
  type S3Source,
  type SourceSpec,
} from './source-schema.js';

export const API_VERSION = 'ferry.dev/v1alpha1';
export const KIND = 'ServedModel';

const DEFAULT_REPLICAS = 1;

// Only one pod can mount a ReadWriteOncePod volume: at most one replica, and no adapters, as nothing could put an
// adapter's files on it while the engine serves. The parser's check (crossFieldIssues) and this if/then, which the
// generator copies into the JSON Schema, read the same constants; the JSON Schema sees a field left out, which the
// parser fills with its default.
const ONE_POD: z.output<typeof storageSchema>['accessMode'] = 'ReadWriteOncePod';
const ONE_POD_MAX_REPLICAS = 1;
const ONE_POD_MAX_ADAPTERS = 0;
const onePodVolumeJson = {
  if: {
    required: ['storage'],
    properties: {
      storage: { type: 'object', required: ['accessMode'], properties: { accessMode: { const: ONE_POD } } },
    },
  },
  then: {
    ...(DEFAULT_REPLICAS > ONE_POD_MAX_REPLICAS ? { required: ['replicas'] } : {}),
    properties: {
      replicas: { type: 'integer', maximum: ONE_POD_MAX_REPLICAS },
      scaling: { type: 'object', properties: { maxReplicas: { type: 'integer', maximum: ONE_POD_MAX_REPLICAS } } },
      engine: {
        type: 'object',
        properties: {
          lora: { type: 'object', properties: { adapters: { type: 'array', maxItems: ONE_POD_MAX_ADAPTERS } } },
        },
      },
    },
  },
};

const specFields = strict({
  // No default here: the parser must see whether it was written (not with placement); withDefaults fills it.
  cluster: dnsLabel('cluster name (it picks the worker and task queue)', 'default')
    .optional()
    .describe(
      'The cluster whose worker serves the model (task queue ferry-<cluster>). Cannot change later. Unset: default, or with placement the cluster Ferry chooses.',
    ),
  placement: clusterPlacementSchema
    .optional()
    .describe(
      "Let Ferry choose the cluster, once, when the model is first served: of these clusters, the one where the model's replicas fit with the most GPUs left (docs/design/fleet.md). Not with cluster. The model is then served with cluster set to the one chosen (and without placement); applying the document again goes to that cluster.",
    ),
  source: sourceSchema.describe('Where the weights come from: exactly one of huggingface, pvc, s3 or oci.'),
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
    .default(DEFAULT_REPLICAS)
    .describe(
      'Engine pods; 0 keeps the volume, the weights and the Service but stops the engine. With scaling: the count the engine starts at, raised to scaling.minReplicas (leave it out).',
    ),
  scaling: scalingSchema
    .optional()
    .describe(
      "Follow the load: the worker reads each replica's requests in flight from vLLM's metrics and sets the replica count between minReplicas and maxReplicas (docs/design/scaling.md). Unset: replicas is the count.",
    ),
  expiresAt: expiresAtSchema
    .optional()
    .describe(
      'When the model deletes itself, as an RFC 3339 time with a zone (2027-01-31T00:00:00Z): one durable timer in its workflow; an update moves or removes it. Unset: never.',
    ),
  puller: pullerSchema.prefault({}).describe('The Job that downloads or copies the weights into the volume.'),
  slo: sloSchema
    .optional()
    .describe(
      'A latency goal: Ferry measures the highest concurrency at which one replica meets it and records it in status.baseline. Unset: nothing is measured.',
    ),
  front: frontSchema
    .optional()
    .describe(
      "An always-on HAProxy, <name>-front, that the model's Service points at instead of the engine pods: it holds a request while no replica answers (a rollout, a restart) for up to holdFor, and answers what is over its bound with 503 and Retry-After, never a refused connection. status.endpoint stays the same. Unset: the Service points at the engine pods.",
    ),
  rollout: rolloutSchema
    .optional()
    .describe(
      'How a new revision (a change of the source, or of the engine pods: engine, resources, scheduling) replaces the one that serves (docs/design/rollout.md). Unset: Recreate.',
    ),
  inferencePool: inferencePoolSchema
    .optional()
    .describe(
      "Also register the engine pods as an InferencePool <name> (inference.networking.k8s.io/v1, the Gateway API Inference Extension), so an inference gateway routes to them; its endpoints are each pod's admission port when slo.admission is on. The cluster must have the extension's CRDs. Unset: no pool.",
    ),
}).meta(onePodVolumeJson);

// A cluster named, or clusters to choose from: not both. Checked by the parser and said in the JSON Schema.
const specSchema = withFieldRules(specFields, [
  {
    when: { field: 'placement', set: true },
    then: { field: 'cluster', set: false },
    at: 'placement',
    message:
      'cannot be given with spec.cluster: with spec.placement Ferry chooses the cluster; give one of spec.cluster and spec.placement',
  },
]);

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
      params: parserOnly('shm-below-memory'),
      path: ['spec', 'resources', 'shmSize'],
      message: `must be smaller than resources.memory (${spec.resources.memory}): the memory-backed /dev/shm counts against the container's memory limit`,
    });
  }
  if (spec.source.pvc && spec.source.pvc.claimName === `${metadata.name}-weights`) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('own-volume'),
      path: ['spec', 'source', 'pvc', 'claimName'],
      message: `must not be ${metadata.name}-weights: that is the model's own volume, which the weights are copied into`,
    });
  }
  const { lora } = spec.engine;
  if ((lora.adapters?.length ?? 0) > ONE_POD_MAX_ADAPTERS && spec.storage.accessMode === ONE_POD) {
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
        params: parserOnly('adapter-not-base'),
        path: ['spec', 'engine', 'lora', 'adapters', index, 'name'],
        message: `must differ from the base model's served name ${quote(baseName)}: requests name the adapter or the base by it`,
      });
    }
    if (adapter.source.pvc?.claimName === `${metadata.name}-weights`) {
      ctx.addIssue({
        code: 'custom',
        params: parserOnly('own-volume'),
        path: ['spec', 'engine', 'lora', 'adapters', index, 'source', 'pvc', 'claimName'],
        message: `must not be ${metadata.name}-weights: that is the model's own volume, which the adapters are copied into`,
      });
    }
  });
  scalingIssues(spec, ctx);
  sharedCacheIssues(spec, ctx);
  if (spec.rollout) for (const issue of rolloutIssues(spec.rollout, spec)) ctx.addIssue({ code: 'custom', ...issue });
  if (spec.storage.accessMode === ONE_POD && spec.replicas > ONE_POD_MAX_REPLICAS) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'replicas'],
      message: 'must be 0 or 1 with storage.accessMode ReadWriteOncePod: only one pod can mount the volume',
    });
  }
}

/** What `scaling` asks of the rest of the spec: bounds in order, a target it can find, a volume more pods can mount. */
function scalingIssues(spec: Document['spec'], ctx: z.core.$RefinementCtx<Document>): void {
  const { scaling } = spec;
  if (!scaling) return;
  if (scaling.minReplicas > scaling.maxReplicas) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('scaling-bounds'),
      path: ['spec', 'scaling', 'minReplicas'],
      message: `must be at most maxReplicas (${scaling.maxReplicas})`,
    });
  }
  if (spec.replicas > scaling.maxReplicas) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('scaling-bounds'),
      path: ['spec', 'replicas'],
      message: `must be at most scaling.maxReplicas (${scaling.maxReplicas}); with scaling, leave it out: the engine starts at minReplicas`,
    });
  }
  for (const [i, window] of (scaling.schedule ?? []).entries()) {
    if (window.minReplicas <= scaling.minReplicas || window.minReplicas > scaling.maxReplicas) {
      ctx.addIssue({
        code: 'custom',
        params: parserOnly('scaling-bounds'),
        path: ['spec', 'scaling', 'schedule', i, 'minReplicas'],
        message: `must be above scaling.minReplicas (${scaling.minReplicas}) and at most maxReplicas (${scaling.maxReplicas}): a window raises the fewest replicas`,
      });
    }
  }
  if (scaling.targetConcurrency === undefined && !spec.slo) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('scaling-target'),
      path: ['spec', 'scaling', 'targetConcurrency'],
      message:
        'is required without slo: the default is a share of the capacity Ferry measures against slo (status.baseline.maxConcurrency)',
    });
  }
  if (scaling.idleToZeroAfter !== undefined) idleToZeroIssues(spec, scaling.idleToZeroAfter, ctx);
  if (spec.storage.accessMode === ONE_POD && scaling.maxReplicas > ONE_POD_MAX_REPLICAS) {
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'scaling', 'maxReplicas'],
      message: 'must be 1 with storage.accessMode ReadWriteOncePod: only one pod can mount the volume',
    });
  }
}

/** Zero replicas need the front to hold requests meanwhile, and a quiet spell long enough to mean something. */
function idleToZeroIssues(spec: Document['spec'], idleToZeroAfter: string, ctx: z.core.$RefinementCtx<Document>): void {
  const path = ['spec', 'scaling', 'idleToZeroAfter'];
  let ms: number | undefined;
  try {
    ms = parseDuration(idleToZeroAfter);
  } catch {
    // The field's own rule has said why.
  }
  if (ms !== undefined && ms < MIN_IDLE_TO_ZERO_MS) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('idle-to-zero'),
      path,
      message: `must be at least 1m, got ${quote(idleToZeroAfter)}: a shorter quiet spell is a pause between requests, and every wake costs a replica's start`,
    });
  }
  if (!spec.front) {
    ctx.addIssue({
      code: 'custom',
      params: parserOnly('idle-to-zero'),
      path,
      message:
        'needs front (add `front: {}`): at zero no replica answers, and the front is what holds a request and wakes the model',
    });
  }
}

function withDefaults(doc: Document) {
  const { image, servedModelName, ...engine } = doc.spec.engine;
  // Placed, the cluster is Ferry's to choose: until then, the first listed, whose worker runs the placement.
  const cluster = doc.spec.cluster ?? doc.spec.placement?.clusters[0] ?? DEFAULT_CLUSTER;
  return {
    ...doc,
    spec: {
      ...doc.spec,
      cluster,
      engine: { image, servedModelName: servedModelName ?? doc.metadata.name, ...engine },
    },
  };
}

/** The ServedModel document: validates, rejects unknown keys at every level and fills every default. */
export const servedModelSchema = documentSchema.superRefine(crossFieldIssues).transform(withDefaults);

/** A document as people write it: everything with a default is optional. */
export type ServedModelInput = z.input<typeof servedModelSchema>;
/**
 * A validated document with every default filled in. Valid input itself, parsing it again returns it unchanged, but
 * for a placed one (`spec.placement`): its `spec.cluster` is the first listed until the client library places it.
 */
export type ServedModel = z.output<typeof servedModelSchema>;
export type ServedModelSpec = ServedModel['spec'];
export type EngineSpec = ServedModelSpec['engine'];
export type ResourcesSpec = ServedModelSpec['resources'];
export type StorageSpec = ServedModelSpec['storage'];
export type SchedulingSpec = ServedModelSpec['scheduling'];
export type PullerSpec = ServedModelSpec['puller'];
export type SecretKeyRef = NonNullable<EngineSpec['apiKeySecret']>;

/**
 * What a shared cache of weights (docs/design/cache.md) is not yet built for: adapters, whose files and record are the
 * model's own, on a volume other models use; a volume only one pod can mount; a candidate revision in a second slot.
 */
function sharedCacheIssues(spec: Document['spec'], ctx: z.core.$RefinementCtx<Document>): void {
  if (spec.storage.cache !== 'shared') return;
  const issue = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: 'custom', params: parserOnly('shared-cache'), path: ['spec', ...path], message });
  if ((spec.engine.lora.adapters?.length ?? 0) > 0) {
    issue(
      ['engine', 'lora', 'adapters'],
      "cannot be used with storage.cache shared yet: an adapter's files go on the model's own volume",
    );
  }
  if (spec.storage.accessMode === ONE_POD) {
    issue(
      ['storage', 'accessMode'],
      'cannot be ReadWriteOncePod with storage.cache shared: the models sharing the volume each need a pod on it',
    );
  }
  const strategy = spec.rollout?.strategy;
  if (strategy === 'BlueGreen' || strategy === 'Canary') {
    issue(
      ['rollout', 'strategy'],
      `cannot be ${strategy} with storage.cache shared yet: a candidate revision needs a volume of its own; use Recreate`,
    );
  }
}
