import { KubeConfig, VersionApi } from '@kubernetes/client-node';
import { Connection } from '@temporalio/client';
import { readLocalEnv } from './local-env.js';

// Integration tests run against the real local stack; fail at once, with the fix, when it is not up.
export default async function setup(): Promise<void> {
  const env = readLocalEnv();
  const kc = new KubeConfig();
  kc.loadFromFile(env.KUBECONFIG);
  try {
    await kc.makeApiClient(VersionApi).getCode();
  } catch (err) {
    throw new Error(`the local Kubernetes API server does not answer (${String(err)}): run \`npm run local:up\``);
  }
  try {
    const conn = await Connection.connect({ address: env.TEMPORAL_ADDRESS, connectTimeout: 5_000 });
    await conn.close();
  } catch (err) {
    throw new Error(`the local Temporal server does not answer (${String(err)}): run \`npm run local:up\``);
  }
}
