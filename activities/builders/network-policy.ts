import type { V1LabelSelector, V1NetworkPolicy } from '@kubernetes/client-node';
import type { ServedModel } from '../../workflows/contract/index.js';
import { ENGINE_PORT_NAME, HTTP_PORT_NAME } from './deployment.js';
import { LABEL_INSTANCE, selectorLabels } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { deploymentName, slotBase } from './names.js';

// A NetworkPolicy per model (docs/design/network-policy.md), when the worker runs with FERRY_NETWORK_POLICY=on: the
// engine pods' `http` port (the gate sidecar's nginx, which serves clients only the inference routes) is open to every
// peer; their `engine` port (vLLM itself, with its admin routes: adapter loads, elastic scaling, …) only to the
// worker's pods. Named ports, not numbers: a pod built before the worker turned the policy on has no gate, its engine
// port is still named `http`, and the policy leaves it as open as it was until the look rolls the gate out.

/** Which pods the engine admits on its own port: the worker's, by its namespace and its pods' labels. */
export interface NetworkPolicyPeer {
  namespace: string;
  podLabels: Record<string, string>;
}

/** The policy carries the model's name, like its Deployment, Service and InferencePool. */
export function networkPolicyName(model: string): string {
  return deploymentName(model);
}

/** Set by the namespace lifecycle controller on every namespace (Kubernetes 1.22 and later): its name. */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/**
 * The model's engine pods; with a front, those of both slots (docs/design/rollout.md, section 2): a candidate's pods
 * are guarded from their first moment.
 */
function enginePods(model: ServedModel): V1LabelSelector {
  const name = model.metadata.name;
  if (!model.spec.front) return { matchLabels: selectorLabels(name) };
  const { [LABEL_INSTANCE]: _instance, ...rest } = selectorLabels(name);
  return {
    matchLabels: rest,
    matchExpressions: [{ key: LABEL_INSTANCE, operator: 'In', values: [name, slotBase(name, 'b')] }],
  };
}

/** The model's NetworkPolicy for a worker that runs with one (`options.networkPolicy`); undefined otherwise. */
export function buildNetworkPolicy(model: ServedModel, options: ChildOptions): V1NetworkPolicy | undefined {
  const peer = options.networkPolicy;
  if (!peer) return undefined;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: objectMeta(model, 'network', networkPolicyName(model.metadata.name), { rootUid: options.rootUid }),
    spec: {
      podSelector: enginePods(model),
      policyTypes: ['Ingress'],
      ingress: [
        // Clients, the gateway and its endpoint picker, Prometheus: the inference routes, through the gate.
        { ports: [{ protocol: 'TCP', port: HTTP_PORT_NAME }] },
        // The worker: health, adapters, the baseline's probes, straight to vLLM.
        {
          // `_from`: the client library's name for `from` (a reserved word), written as `from` on the wire.
          _from: [
            {
              namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: peer.namespace } },
              podSelector: { matchLabels: { ...peer.podLabels } },
            },
          ],
          ports: [{ protocol: 'TCP', port: ENGINE_PORT_NAME }],
        },
      ],
    },
  };
}
