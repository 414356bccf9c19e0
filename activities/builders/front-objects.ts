// The Kubernetes objects of a model's front (docs/design/scaling.md, section 6): a small HAProxy Deployment, no GPU,
// that the model's own Service selects in place of the engine pods, so that `status.endpoint` stays the same while
// the engine is at zero; the engine pods get a Service of their own, which only the front uses. The configuration is
// front.ts'; here it is placed in a ConfigMap and the pod template carries its hash, so a new configuration rolls the
// front (with maxUnavailable 0: one front pod is always there to take requests). Pure. Applied with `spec.front`.
import type { V1ConfigMap, V1Deployment, V1Service } from '@kubernetes/client-node';
import { durationSeconds, type RevisionShare, type ServedModel } from '../../workflows/contract/index.js';
import { HTTP_PORT_NAME } from './deployment.js';
import { FRONT_DEFAULTS, frontConfig, type FrontOptions } from './front.js';
import { sha256Hex } from './hash.js';
import { LABEL_COMPONENT, LABEL_INSTANCE, LABEL_NAME, selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { frontName, serviceName, slotBase, slotEngineServiceName } from './names.js';
import { containerSecurityContext } from './pod.js';
import { modelService } from './service.js';

/**
 * The official HAProxy image (Alpine; runs as the unprivileged `haproxy`, uid 99, and reads
 * /usr/local/etc/haproxy/haproxy.cfg), pinned to an exact LTS release. A tag, not a digest, like the engine's default
 * image. Not pulled here, where no container runs: the configuration is checked with Debian's HAProxy 2.6
 * (test/integration/front/hold.test.ts), and every directive it uses is in both.
 */
const FRONT_IMAGE = 'haproxy:3.4.8-alpine';
export const FRONT_CONTAINER = 'haproxy';
const HAPROXY_UID = 99;
/** Where the exporter answers GET /metrics, and GET /ready for the kubelet, beside the model's port. */
export const FRONT_METRICS_PORT = 9101;
const METRICS_PORT_NAME = 'metrics';
const READY_PATH = '/ready';
const CONFIG_DIR = '/usr/local/etc/haproxy';
const CONFIG_FILE = 'haproxy.cfg';
/** On the pod template: the configuration's hash, so that a new one rolls the front. */
export const FRONT_CONFIG_HASH = 'ferry.dev/front-config-hash';
/** Two pods, on different nodes where there are several: a front that is always there, even through a node's loss. */
const FRONT_REPLICAS = 2;

/** The front pods' selector (and the model's Service's, once it has a front). Depends on the name only. */
export function frontSelectorLabels(name: string): Record<string, string> {
  return { [LABEL_NAME]: 'vllm', [LABEL_INSTANCE]: name, [LABEL_COMPONENT]: 'front' };
}

/** How long the front holds a request: `spec.front.holdFor` in seconds (the default's when there is no front). */
function holdSeconds(model: ServedModel): number {
  return model.spec.front ? durationSeconds(model.spec.front.holdFor) : FRONT_DEFAULTS.holdSeconds;
}

/** Without a rollout: the one revision, in slot `a`, takes every request. */
const ONE_REVISION: readonly RevisionShare[] = [{ revision: 'r1', slot: 'a', weight: 100 }];

/**
 * The front's haproxy.cfg for `model`: the model's port in front of the engine Service of each revision in `shares`
 * (docs/design/rollout.md, section 3).
 */
export function frontConfigFor(
  model: ServedModel,
  options: Partial<FrontOptions> = {},
  shares: readonly RevisionShare[] = ONE_REVISION,
): string {
  const { name, namespace } = model.metadata;
  const port = model.spec.engine.port;
  return frontConfig({
    ...FRONT_DEFAULTS,
    holdSeconds: holdSeconds(model),
    ...(model.spec.front ? { maxQueued: model.spec.front.maxQueued } : {}),
    bind: `:${port}`,
    servers: shares.map((s) => ({
      revision: s.revision,
      address: `${slotEngineServiceName(name, s.slot)}.${namespace}.svc:${port}`,
      weight: s.weight,
    })),
    metricsBind: `:${FRONT_METRICS_PORT}`,
    readyPath: READY_PATH,
    ...options,
  });
}

/** The ConfigMap that holds the front's configuration. */
export function frontConfigMap(
  model: ServedModel,
  options: ChildOptions,
  config = frontConfigFor(model, {}, options.shares),
): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: objectMeta(model, 'front', frontName(model.metadata.name), { rootUid: options.rootUid }),
    data: { [CONFIG_FILE]: config },
  };
}

/** The front's Deployment: HAProxy with the ConfigMap's configuration, small, no GPU, never at zero. */
export function frontDeployment(
  model: ServedModel,
  options: ChildOptions,
  config = frontConfigFor(model, {}, options.shares),
): V1Deployment {
  const name = model.metadata.name;
  const labels = { ...objectMeta(model, 'front', '').labels, ...frontSelectorLabels(name) };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: objectMeta(model, 'front', frontName(name), { rootUid: options.rootUid }),
    spec: {
      replicas: FRONT_REPLICAS,
      selector: { matchLabels: frontSelectorLabels(name) },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels, annotations: { [FRONT_CONFIG_HASH]: sha256Hex(config).slice(0, 16) } },
        spec: {
          securityContext: {
            runAsNonRoot: true,
            runAsUser: HAPROXY_UID,
            runAsGroup: HAPROXY_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          // A request held for minutes is in a front pod: on a rollout of the front, the old pod finishes it.
          terminationGracePeriodSeconds: holdSeconds(model),
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                {
                  weight: 100,
                  podAffinityTerm: {
                    labelSelector: { matchLabels: frontSelectorLabels(name) },
                    topologyKey: 'kubernetes.io/hostname',
                  },
                },
              ],
            },
          },
          containers: [
            {
              name: FRONT_CONTAINER,
              image: FRONT_IMAGE,
              // -W: master-worker, so SIGUSR2 reloads and SIGUSR1 ends gracefully; -db: in the foreground.
              command: ['haproxy', '-W', '-db', '-f', `${CONFIG_DIR}/${CONFIG_FILE}`],
              ports: [
                { name: HTTP_PORT_NAME, containerPort: model.spec.engine.port, protocol: 'TCP' },
                { name: METRICS_PORT_NAME, containerPort: FRONT_METRICS_PORT, protocol: 'TCP' },
              ],
              // Ready is the front's own: never the engine's health, which at zero would be held for the whole hold.
              readinessProbe: {
                httpGet: { path: READY_PATH, port: METRICS_PORT_NAME },
                periodSeconds: 5,
                failureThreshold: 2,
              },
              livenessProbe: {
                httpGet: { path: READY_PATH, port: METRICS_PORT_NAME },
                periodSeconds: 10,
                failureThreshold: 3,
              },
              // The image stops HAProxy with SIGUSR1 (its STOPSIGNAL): it stops listening and finishes what it holds.
              // First a pause, so that the Service stops sending it connections before it stops taking them.
              lifecycle: { preStop: { exec: { command: ['sleep', '5'] } } },
              resources: {
                requests: { cpu: '50m', memory: '64Mi' },
                limits: { memory: '256Mi' },
              },
              securityContext: { ...containerSecurityContext(), readOnlyRootFilesystem: true },
              volumeMounts: [{ name: 'config', mountPath: CONFIG_DIR, readOnly: true }],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: frontName(name) } }],
        },
      },
    },
  };
}

/** The model's Service with a front: the same name and port as without one, selecting the front pods. */
export function frontedService(model: ServedModel, options: ChildOptions): V1Service {
  const name = model.metadata.name;
  return modelService(model, serviceName(name), frontSelectorLabels(name), options);
}

/**
 * The engine pods' own Service, which the front passes requests to (through each pod's admission, if it has one): in
 * `options.slot`'s names (docs/design/rollout.md, section 2).
 */
export function engineService(model: ServedModel, options: ChildOptions): V1Service {
  const name = model.metadata.name;
  const selector = selectorLabels(slotBase(name, options.slot));
  return modelService(model, slotEngineServiceName(name, options.slot), selector, options);
}

/** With `spec.front`: the engine's own Service (first: HAProxy resolves it when it starts), the configuration, HAProxy. */
export function buildFront(
  model: ServedModel,
  options: ChildOptions,
): { engineService: V1Service; frontConfig: V1ConfigMap; frontDeployment: V1Deployment } | Record<string, never> {
  if (!model.spec.front) return {};
  const config = frontConfigFor(model, {}, options.shares);
  return {
    engineService: engineService(model, options),
    frontConfig: frontConfigMap(model, options, config),
    frontDeployment: frontDeployment(model, options, config),
  };
}
