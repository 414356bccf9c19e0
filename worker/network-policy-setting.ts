// The worker's NetworkPolicy setting (docs/design/network-policy.md): FERRY_NETWORK_POLICY=on gives each model a policy
// that admits only the worker's pods to vLLM's own port, which needs to know those pods: their namespace
// (FERRY_WORKER_NAMESPACE) and labels (FERRY_WORKER_POD_LABELS). The chart sets all three.
import type { NetworkPolicyPeer } from '../activities/builders/index.js';
import { DNS1123_LABEL } from '../workflows/contract/index.js';
import type { Env } from '../client/temporal-env.js';

/** What the flags give, each overriding its variable. */
export interface NetworkPolicyFlags {
  'network-policy'?: string | undefined;
  'worker-namespace'?: string | undefined;
  'worker-pod-labels'?: string | undefined;
}

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `k=v,k=v` as Kubernetes labels; each problem is pushed onto `problems`. */
function parseLabels(text: string, problems: string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const term of text.split(',').map((t) => t.trim())) {
    if (!term) continue;
    const at = term.indexOf('=');
    const key = at < 0 ? term : term.slice(0, at);
    const value = at < 0 ? undefined : term.slice(at + 1);
    const slash = key.lastIndexOf('/');
    const prefix = slash < 0 ? undefined : key.slice(0, slash);
    const name = slash < 0 ? key : key.slice(slash + 1);
    if (value === undefined) {
      problems.push(`worker pod label ${JSON.stringify(term)} must be key=value`);
    } else if (
      !LABEL_NAME.test(name) ||
      (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    ) {
      problems.push(`worker pod label key ${JSON.stringify(key)} is not a Kubernetes label key`);
    } else if (value !== '' && !LABEL_NAME.test(value)) {
      problems.push(`worker pod label value ${JSON.stringify(value)} (of ${key}) is not a Kubernetes label value`);
    } else {
      labels[key] = value;
    }
  }
  return labels;
}

/**
 * The peer every model's NetworkPolicy admits to vLLM's port, or undefined when the setting is off (the default).
 * Refused, each problem onto `problems`: an unknown value, a missing or malformed namespace or labels, and a worker
 * that reaches engines through the API server's proxy (its requests come from the API server, which no pod selector
 * names: the policy would shut the worker out).
 */
export function networkPolicyOf(
  flags: NetworkPolicyFlags,
  env: Env,
  problems: string[],
): NetworkPolicyPeer | undefined {
  const setting = (flags['network-policy'] ?? env.FERRY_NETWORK_POLICY ?? 'off').toLowerCase();
  if (setting !== 'on' && setting !== 'off') {
    problems.push(`network policy ${JSON.stringify(setting)} must be on or off`);
    return undefined;
  }
  if (setting === 'off') return undefined;
  const namespace = flags['worker-namespace'] ?? (env.FERRY_WORKER_NAMESPACE || undefined);
  const labelsText = flags['worker-pod-labels'] ?? (env.FERRY_WORKER_POD_LABELS || undefined);
  const before = problems.length;
  if (namespace === undefined) {
    problems.push(
      '--network-policy on admits the worker by its namespace: give --worker-namespace (FERRY_WORKER_NAMESPACE)',
    );
  } else if (namespace.length > 63 || !DNS1123_LABEL.test(namespace)) {
    problems.push(`worker namespace ${JSON.stringify(namespace)} must be a DNS label`);
  }
  const podLabels = labelsText === undefined ? {} : parseLabels(labelsText, problems);
  if (labelsText !== undefined && Object.keys(podLabels).length === 0 && problems.length === before) {
    problems.push('worker pod labels are empty: they would admit every pod of the worker namespace');
  } else if (labelsText === undefined) {
    problems.push(
      "--network-policy on admits the worker by its pods' labels: give --worker-pod-labels k=v,… (FERRY_WORKER_POD_LABELS)",
    );
  }
  const mode = env.FERRY_ENDPOINT_MODE?.trim() || (env.KUBERNETES_SERVICE_HOST ? 'in-cluster' : 'service-proxy');
  if (mode === 'service-proxy') {
    problems.push(
      '--network-policy on needs a worker that reaches engines from its own pod (FERRY_ENDPOINT_MODE=in-cluster): ' +
        "through the API server's proxy its requests come from the API server, which the policy does not admit",
    );
  }
  return problems.length === before ? { namespace: namespace!, podLabels } : undefined;
}
