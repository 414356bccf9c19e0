// Entry of the local engine stand-in supervisor (started by `npm run local:up`):
//   FERRY_ENDPOINT_OVERRIDES=.ferry/run/endpoints.json node --import tsx deploy/engine-sim/supervisor-main.ts
import { CoreV1Api, DiscoveryV1Api, KubeConfig } from '@kubernetes/client-node';
import { EngineSimSupervisor, log } from './supervisor.js';

async function main(): Promise<void> {
  const file = process.env.FERRY_ENDPOINT_OVERRIDES;
  if (!file) throw new Error('FERRY_ENDPOINT_OVERRIDES must name the JSON file to write');
  const kc = new KubeConfig();
  kc.loadFromDefault();
  // With the node agent (--engine vllm): a fronted model's real vLLM is reached at a ready endpoint of its Service.
  const supervisor = new EngineSimSupervisor(kc.makeApiClient(CoreV1Api), file, {
    discovery: kc.makeApiClient(DiscoveryV1Api),
  });
  let stopping = false;
  const stop = () => {
    stopping = true;
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  log('watching simulated engine pods', { overrides: file });
  while (!stopping) {
    await supervisor.sync().catch((err: unknown) => log('sync failed', { error: String(err) }));
    await new Promise((r) => setTimeout(r, 1_000));
  }
  await supervisor.stop();
  process.exit(0);
}

await main();
