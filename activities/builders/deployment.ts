import type { V1Deployment, V1EnvVar, V1PodTemplateSpec, V1Probe } from '@kubernetes/client-node';
import { durationSeconds, type ScalingPolicy, type ServedModel, type Slot } from '../../workflows/contract/index.js';
import { admissionContainer, admissionVolume, hasSidecar } from './admission.js';
import { canonicalJson, sha256Hex } from './hash.js';
import { ANNOTATION_SCALING, ANNOTATION_SPEC_HASH, labelsFor, selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { cacheAffinity, cacheKey, LABEL_CACHE, onSharedCache, weightsClaim } from './cache.js';
import { deploymentName, slotBase } from './names.js';
import {
  containerEnvVar,
  containerSecurityContext,
  onTheEnginesNode,
  podScheduling,
  podSecurityContext,
} from './pod.js';
import { MODELS_DIR, sourceAnnotations, weightsDir } from './source.js';

export const ENGINE_CONTAINER = 'vllm';
export const HTTP_PORT_NAME = 'http';
/** The engine's own port when the sidecar (admission, or the gate) has the name the Service targets. */
export const ENGINE_PORT_NAME = 'engine';
export const HEALTH_PATH = '/health';
const STARTUP_PROBE_PERIOD_SECONDS = 10;
/** Time the Deployment controller allows beyond the startup budget before it reports ProgressDeadlineExceeded. */
const PROGRESS_DEADLINE_MARGIN_SECONDS = 600;

export interface DeploymentOptions extends ChildOptions {
  /** Overrides spec.replicas, e.g. 0 to release a ReadWriteOnce volume before a new pull. */
  replicas?: number;
  /** The autoscaler's policy, for a model with spec.scaling whose target is known: the `ferry.dev/scaling` annotation. */
  scaling?: ScalingPolicy;
}

/** The engine's startup budget in seconds (`engine.startupTimeout`, 40 minutes by default). */
function startupBudgetSeconds(model: ServedModel): number {
  return durationSeconds(model.spec.engine.startupTimeout);
}

/**
 * Arguments to the image's entrypoint (`vllm serve`). The API key is never among them: vLLM reads it from
 * VLLM_API_KEY, which comes from a Secret.
 */
function engineArgs(model: ServedModel): string[] {
  const { engine, source } = model.spec;
  const args = [
    '--model',
    weightsDir(source),
    '--served-model-name',
    engine.servedModelName,
    '--port',
    String(engine.port),
  ];
  if (engine.lora.enabled) {
    args.push('--enable-lora', `--max-loras=${engine.lora.maxLoras}`);
    // Only when set: a model that does not set it keeps the pod template it had (a Ferry upgrade rolls out nothing).
    if (engine.lora.maxLoraRank !== undefined) args.push(`--max-lora-rank=${engine.lora.maxLoraRank}`);
  }
  return [...args, ...engine.args];
}

function engineEnv(model: ServedModel): V1EnvVar[] {
  const { engine } = model.spec;
  const userNames = new Set(engine.env.map((variable) => variable.name));
  // Defaults a user may override (the spec rejects the names Ferry must own).
  const defaults: V1EnvVar[] = [{ name: 'VLLM_NO_USAGE_STATS', value: '1' }].filter((v) => !userNames.has(v.name));
  const env: V1EnvVar[] = [{ name: 'HF_HUB_OFFLINE', value: '1' }, ...defaults];
  if (engine.apiKeySecret) {
    const { name, key } = engine.apiKeySecret;
    env.push({ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name, key } } });
  }
  if (engine.lora.enabled) env.push({ name: 'VLLM_ALLOW_RUNTIME_LORA_UPDATING', value: 'True' });
  env.push(...engine.env.map(containerEnvVar));
  return env;
}

function healthProbe(port: string, periodSeconds: number, failureThreshold: number): V1Probe {
  return {
    httpGet: { path: HEALTH_PATH, port },
    periodSeconds,
    failureThreshold,
    timeoutSeconds: 5,
  };
}

/**
 * The engine's scheduling. Replicas on a ReadWriteOnce volume share one node (`scheduling.colocateReplicas`): on
 * another node a replica waits with Multi-Attach for as long as the first runs (found when the local stack's node
 * agent first ran two real replicas). Whatever the replica count, so that scaling rolls out nothing; a spec accepted
 * before the field existed has none and keeps the template it had (a Ferry upgrade rolls out nothing).
 */
function engineScheduling(model: ServedModel, slot: Slot | undefined): ReturnType<typeof podScheduling> {
  const scheduling = podScheduling(model);
  const colocated =
    model.spec.scheduling.colocateReplicas !== true || model.spec.storage.accessMode !== 'ReadWriteOnce'
      ? scheduling
      : { ...scheduling, affinity: onTheEnginesNode(model, slot)! };
  // On a shared ReadWriteOnce cache: also on the node of every other pod of the cache (docs/design/cache.md).
  if (!onSharedCache(model)) return colocated;
  const affinity = cacheAffinity(model, colocated.affinity);
  return affinity ? { ...colocated, affinity } : colocated;
}

function podTemplate(model: ServedModel, options: ChildOptions): V1PodTemplateSpec {
  const { engine, resources, source } = model.spec;
  // With the sidecar the Service's port name goes to it; the engine's probes and the worker reach vLLM directly.
  const admission = hasSidecar(model, options);
  const port = admission ? ENGINE_PORT_NAME : HTTP_PORT_NAME;
  const amounts: Record<string, string> = {
    cpu: resources.cpu,
    memory: resources.memory,
    ...(resources.gpus > 0 ? { [resources.gpuResource]: String(resources.gpus) } : {}),
  };
  const base = slotBase(model.metadata.name, options.slot);
  const template: V1PodTemplateSpec = {
    metadata: {
      labels: {
        ...labelsFor(model, 'engine'),
        ...selectorLabels(base),
        ...(onSharedCache(model) ? { [LABEL_CACHE]: cacheKey(model.spec.source) } : {}),
      },
      // A new source changes the template, so the Deployment rolls new pods.
      annotations: sourceAnnotations(source),
    },
    spec: {
      // Service links would put <SERVICE>_PORT variables into the pod; one named vllm sets VLLM_PORT for vLLM.
      enableServiceLinks: false,
      automountServiceAccountToken: false,
      securityContext: podSecurityContext(),
      ...engineScheduling(model, options.slot),
      containers: [
        {
          name: ENGINE_CONTAINER,
          image: engine.image,
          // No `command`: the image's entrypoint is `vllm serve`.
          args: engineArgs(model),
          ports: [{ name: port, containerPort: engine.port, protocol: 'TCP' }],
          env: engineEnv(model),
          resources: { requests: amounts, limits: { ...amounts } },
          // The whole startup budget: 10 s x 240 = 40 minutes of loading before the kubelet gives up.
          startupProbe: healthProbe(
            port,
            STARTUP_PROBE_PERIOD_SECONDS,
            Math.ceil(startupBudgetSeconds(model) / STARTUP_PROBE_PERIOD_SECONDS),
          ),
          readinessProbe: healthProbe(port, 10, 3),
          livenessProbe: healthProbe(port, 15, 4),
          securityContext: containerSecurityContext(),
          volumeMounts: [
            { name: 'weights', mountPath: MODELS_DIR, readOnly: true },
            { name: 'dshm', mountPath: '/dev/shm' },
          ],
        },
        ...(admission ? [admissionContainer(model)] : []),
      ],
      volumes: [
        { name: 'weights', persistentVolumeClaim: { claimName: weightsClaim(model, options.slot), readOnly: true } },
        // vLLM's worker processes share tensors through /dev/shm; the runtime's default is 64 MiB.
        { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: resources.shmSize } },
        ...(admission ? [admissionVolume(model, options.slot)] : []),
      ],
    },
  };
  template.metadata!.annotations![ANNOTATION_SPEC_HASH] = sha256Hex(canonicalJson(template));
  return template;
}

/**
 * The vLLM Deployment, `<name>`. `Recreate`: a replacement pod must not wait for GPUs its predecessor holds, and a
 * ReadWriteOnce volume forbids a surge pod on another node.
 */
export function buildDeployment(model: ServedModel, options: DeploymentOptions): V1Deployment {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: objectMeta(model, 'engine', deploymentName(slotBase(model.metadata.name, options.slot)), {
      rootUid: options.rootUid,
      annotations: {
        ...sourceAnnotations(model.spec.source),
        ...(options.scaling ? { [ANNOTATION_SCALING]: JSON.stringify(options.scaling) } : {}),
      },
    }),
    spec: {
      replicas: options.replicas ?? model.spec.replicas,
      strategy: { type: 'Recreate' },
      selector: { matchLabels: selectorLabels(slotBase(model.metadata.name, options.slot)) },
      progressDeadlineSeconds: startupBudgetSeconds(model) + PROGRESS_DEADLINE_MARGIN_SECONDS,
      template: podTemplate(model, options),
    },
  };
}
