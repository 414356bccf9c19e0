// The real activities for one cluster: Kubernetes from a kubeconfig or in-cluster credentials, engine endpoints as
// FERRY_ENDPOINT_MODE says, and progress delivered to each workflow as a `progress` signal.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import type { Logger } from '@temporalio/worker';
import { createActivities, type FerryActivities } from '../activities/index.js';
import { Cluster } from '../activities/cluster/api.js';
import { endpointResolverFromEnv } from '../activities/cluster/endpoints.js';
import type { ProgressSink } from '../activities/cluster/progress.js';
import { progressSignal } from '../workflows/contract/index.js';
import type { WorkerConfig } from './config.js';

/** Builds the activities; logs which Kubernetes API server and endpoint mode they use. */
export function realActivities(config: WorkerConfig, client: Client, logger: Logger): FerryActivities {
  const kc = new KubeConfig();
  // loadFromDefault: KUBECONFIG (which may list several files), ~/.kube/config, then the pod's service account.
  if (config.kubeconfig && !config.kubeconfig.includes(':')) kc.loadFromFile(config.kubeconfig);
  else kc.loadFromDefault();
  const endpoints = endpointResolverFromEnv(config.env, kc);
  if (!config.kubeconfig && !config.env.KUBERNETES_SERVICE_HOST && !existsSync(join(homedir(), '.kube', 'config'))) {
    logger.warn('no kubeconfig and not in a pod: the Kubernetes client falls back to http://localhost:8080', {
      hint: 'set KUBECONFIG or --kubeconfig',
    });
  }
  logger.info('kubernetes', {
    server: kc.getCurrentCluster()?.server,
    context: kc.getCurrentContext(),
    user: kc.getCurrentUser()?.name,
    endpointMode: endpoints.mode,
  });
  return createActivities({
    cluster: new Cluster(kc),
    endpoints: endpoints.endpoints,
    ...(endpoints.http ? { http: endpoints.http } : {}),
    progress: progressSink(client),
  });
}

/** Signals progress to the run that asked for it (a report for an older run fails, and is only logged). */
function progressSink(client: Client): ProgressSink {
  return async ({ workflowId, runId }, progress) => {
    await client.workflow.getHandle(workflowId, runId).signal(progressSignal, progress);
  };
}
