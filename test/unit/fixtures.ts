import type { KubernetesObject } from '@kubernetes/client-node';
import { buildAll, objectList, type ModelObjects } from '../../activities/builders/index.js';
import { parseServedModel, type ServedModel, type ServedModelInput } from '../../workflows/contract/index.js';

// Example documents shared by the unit tests (golden files) and the integration tests (which dry-run the same
// objects against a real API server).

/** The root ConfigMap uid the golden files are built with. */
export const FIXTURE_ROOT_UID = '6a1f3e2c-0000-4000-8000-000000000001';

export const minimalHf = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen' },
  spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } } },
} satisfies ServedModelInput;

/** Every field set (and different from its default where that makes sense). */
export const fullHf = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: {
    name: 'qwen-chat',
    namespace: 'models',
    labels: { team: 'ml-platform', 'example.com/cost-center': 'r-d' },
  },
  spec: {
    cluster: 'gpu-east',
    source: {
      huggingface: {
        repo: 'Qwen/Qwen2.5-7B-Instruct',
        revision: 'a09a35458c702b33eeacc393d103063234e8bc28',
        tokenSecret: { name: 'hf-token', key: 'token' },
      },
    },
    engine: {
      image: 'vllm/vllm-openai:v0.11.0',
      servedModelName: 'Qwen/Qwen2.5-7B-Instruct',
      port: 8080,
      args: ['--max-model-len=8192', '--gpu-memory-utilization=0.90', '--max-lora-rank', '64'],
      env: [
        { name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' },
        { name: 'WANDB_API_KEY', valueFrom: { secretKeyRef: { name: 'wandb', key: 'api-key' } } },
      ],
      apiKeySecret: { name: 'qwen-api-key', key: 'key' },
      lora: { enabled: true, maxLoras: 8 },
      startupTimeout: '1h30m',
    },
    resources: { gpus: 2, gpuResource: 'nvidia.com/gpu', cpu: '8', memory: '64Gi', shmSize: '16Gi' },
    storage: { size: '100Gi', storageClassName: 'fast-ssd', accessMode: 'ReadWriteOnce', retainOnDelete: true },
    scheduling: {
      nodeSelector: { 'node.kubernetes.io/instance-type': 'g6e.12xlarge' },
      tolerations: [
        { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
        { key: 'spot', operator: 'Equal', value: 'true', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['us-east-1a'] }] },
            ],
          },
        },
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 50,
              podAffinityTerm: {
                labelSelector: { matchLabels: { 'app.kubernetes.io/instance': 'qwen-chat' } },
                topologyKey: 'kubernetes.io/hostname',
              },
            },
          ],
        },
      },
      colocateReplicas: false,
    },
    replicas: 2,
    puller: {
      image: 'registry.example.com/ml/hf-puller:1.2.0',
      deadline: '3h',
      backoffLimit: 4,
      env: [{ name: 'HF_ENDPOINT', value: 'https://hub-mirror.example.com' }],
    },
  },
} satisfies ServedModelInput;

/** A checkpoint already on a volume, e.g. one a training run wrote. */
export const pvcSource = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'ckpt-eval', namespace: 'research' },
  spec: {
    source: { pvc: { claimName: 'checkpoints', path: 'run-42/step-1000' } },
    engine: { args: ['--max-model-len=4096'] },
    resources: { gpus: 1, cpu: '4', memory: '24Gi', shmSize: '4Gi' },
    storage: { size: '20Gi' },
    puller: { deadline: '30m' },
  },
} satisfies ServedModelInput;

/** A checkpoint in an S3-compatible bucket, e.g. where a training job wrote it; the keys come from a Secret. */
export const s3Source = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'ckpt-s3', namespace: 'research' },
  spec: {
    source: {
      s3: {
        bucket: 'training-runs',
        prefix: 'run-42/step-1000',
        endpoint: 'http://minio.storage:9000',
        credentialsSecret: { name: 'minio-keys' },
      },
    },
    storage: { size: '20Gi' },
  },
} satisfies ServedModelInput;

/** A latency goal: the load baseline is measured, and an nginx sidecar admits what the replica can carry. */
export const sloAdmission = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen-slo', namespace: 'models' },
  spec: {
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    engine: { args: ['--max-num-seqs=16'] },
    replicas: 2,
    slo: { ttft: '2s', itl: '100ms', workload: { promptTokens: 512, outputTokens: 128 } },
  },
} satisfies ServedModelInput;

/** Admission and an InferencePool: an inference gateway's picker routes to each replica's admission port. */
const inferencePool = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen-pool', namespace: 'models' },
  spec: {
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    replicas: 2,
    slo: { ttft: '2s', itl: '100ms' },
    inferencePool: { endpointPicker: { name: 'qwen-pool-epp' } },
  },
} satisfies ServedModelInput;

/** A front: the model's Service points at an HAProxy that holds requests while no replica answers. */
const front = {
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen-front', namespace: 'models' },
  spec: {
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    front: { holdFor: '5m' },
  },
} satisfies ServedModelInput;

export const fixtures = {
  'minimal-hf': minimalHf,
  'full-hf': fullHf,
  'pvc-source': pvcSource,
  's3-source': s3Source,
  'slo-admission': sloAdmission,
  'inference-pool': inferencePool,
  front,
} as const;
export type FixtureName = keyof typeof fixtures;
export const FIXTURE_NAMES = Object.keys(fixtures) as FixtureName[];

export interface FixtureOptions {
  /** Serve the fixture in another namespace (integration tests use their own). */
  namespace?: string;
  rootUid?: string;
}

/** The fixture, parsed (defaults filled), optionally moved to another namespace. */
export function fixtureModel(name: FixtureName, options: FixtureOptions = {}): ServedModel {
  const doc = structuredClone(fixtures[name]) as ServedModelInput;
  if (options.namespace) doc.metadata.namespace = options.namespace;
  return parseServedModel(doc);
}

/** The objects Ferry builds for a fixture, keyed by role. */
export function fixtureObjects(name: FixtureName, options: FixtureOptions = {}): ModelObjects {
  return buildAll(fixtureModel(name, options), { rootUid: options.rootUid ?? FIXTURE_ROOT_UID });
}

/** The same objects as a list in creation order (root, PVC, puller Job, Deployment, Service), ready to apply. */
export function fixtureObjectList(name: FixtureName, options: FixtureOptions = {}): KubernetesObject[] {
  return objectList(fixtureObjects(name, options));
}
