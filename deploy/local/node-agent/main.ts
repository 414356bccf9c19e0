// Entry of the local node agent (started by `npm run local:up -- --engine vllm`, as root: pods run in network and
// mount namespaces and cgroups of their own). Settings come from the environment up.sh sets:
//   KUBECONFIG, FERRY_AGENT_STATE (its directory), FERRY_AGENT_OVERRIDES (the endpoint file it writes),
//   FERRY_POD_BRIDGE, FERRY_POD_GATEWAY, FERRY_POD_PREFIX, FERRY_KUBELET_PORT, FERRY_PKI, FERRY_VLLM_RUNTIME,
//   FERRY_VLLM_IMAGE, FERRY_KUBERNETES_VERSION.
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { NodeAgent } from './agent.js';
import { imageTable } from './images.js';

const log = (msg: string, extra: Record<string, unknown> = {}) =>
  process.stderr.write(
    `${JSON.stringify({ time: new Date().toISOString(), component: 'node-agent', msg, ...extra })}\n`,
  );

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set (deploy/local/up.sh sets it)`);
  return value;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the node agent runs pods in network and mount namespaces and cgroups of their own: run it as root',
    );
  }
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const gateway = setting('FERRY_POD_GATEWAY');
  const pki = setting('FERRY_PKI');
  // Both nodes share this machine. Each offers all of its memory and 16 CPUs, so that the scheduler is not what stops a
  // second replica or the adapter Job here: each container's cgroups hold it to its own limits.
  const memoryGi = Math.floor(totalmem() / 2 ** 30);
  const agent = new NodeAgent({
    kc,
    nodes: [
      { name: 'cpu-node-a', subnet: 1, hostIp: gateway },
      { name: 'cpu-node-b', subnet: 2, hostIp: gateway },
    ],
    zones: ['us-east-1a', 'us-east-1b'],
    capacity: { cpu: '16', memory: `${memoryGi}Gi`, pods: '32', 'ephemeral-storage': '100Gi' },
    kubernetesVersion: setting('FERRY_KUBERNETES_VERSION'),
    stateDir: setting('FERRY_AGENT_STATE'),
    overridesFile: setting('FERRY_AGENT_OVERRIDES'),
    images: imageTable({ vllmRuntime: setting('FERRY_VLLM_RUNTIME'), vllmImage: setting('FERRY_VLLM_IMAGE') }),
    network: { bridge: setting('FERRY_POD_BRIDGE'), gateway, prefix: Number(setting('FERRY_POD_PREFIX')) },
    kubelet: {
      port: Number(setting('FERRY_KUBELET_PORT')),
      cert: join(pki, 'node-agent-serving.crt'),
      key: join(pki, 'node-agent-serving.key'),
      ca: join(pki, 'ca.crt'),
    },
    log,
  });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    log('stopping: ending every container');
    void agent.stop().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await agent.start();
}

await main().catch((err: unknown) => {
  log('node agent failed', { error: String(err) });
  process.exit(1);
});
