// The one wiring file: every activity of a ServeModelWorkflow, bound to one cluster's clients.
import type { FerryActivities } from '../workflows/contract/index.js';
import type { ActivityDeps } from './deps.js';
import { fetchAdapters } from './steps/adapter-files.js';
import { syncAdapters } from './steps/adapters.js';
import { measureBaseline } from './steps/baseline.js';
import { clusterCapacity } from './steps/capacity.js';
import { claimName } from './steps/claim.js';
import { dryRunModel } from './steps/dry-run.js';
import { checkTenantGrant } from './steps/grant.js';
import { applyAdmission, applyEngine, scaleEngine } from './steps/engine.js';
import { awaitHealth, type ApiKeyResolver } from './steps/health.js';
import { lookAtModel } from './steps/look.js';
import { awaitPuller, startPuller } from './steps/puller.js';
import { readStatus } from './steps/read-status.js';
import { retireRevision, shiftTraffic } from './steps/traffic.js';
import { releaseVolume } from './steps/release.js';
import { awaitRollout } from './steps/rollout.js';
import { applyStorage } from './steps/storage.js';
import { tearDown } from './steps/teardown.js';

export interface ActivityOptions {
  /**
   * Where the worker gets a model's API key for /v1/models and the LoRA routes, if anywhere (`apiKeyFromSecret`);
   * usually unset.
   */
  apiKeys?: ApiKeyResolver;
}

export function createActivities(deps: ActivityDeps, options: ActivityOptions = {}): FerryActivities {
  return {
    claimName: (input) => {
      // A model's first step: from now on the worker's watch covers its namespace.
      deps.watcher?.watchNamespace(input.model.metadata.namespace);
      return claimName(deps, input);
    },
    applyStorage: (input) => applyStorage(deps, input),
    startPuller: (input) => startPuller(deps, input),
    awaitPuller: (input) => awaitPuller(deps, input),
    releaseVolume: (input) => releaseVolume(deps, input),
    applyEngine: (input) => applyEngine(deps, input),
    awaitRollout: (input) => awaitRollout(deps, input),
    awaitHealth: (input) => awaitHealth(deps, input, options.apiKeys),
    scaleEngine: (input) => scaleEngine(deps, input),
    readStatus: (input) => readStatus(deps, input, options.apiKeys),
    shiftTraffic: (input) => shiftTraffic(deps, input),
    retireRevision: (input) => retireRevision(deps, input),
    lookAtModel: (input) => lookAtModel(deps, input, options.apiKeys),
    tearDown: (input) => tearDown(deps, input),
    fetchAdapters: (input) => fetchAdapters(deps, input),
    syncAdapters: (input) => syncAdapters(deps, input, options.apiKeys),
    measureBaseline: (input) => measureBaseline(deps, input, options.apiKeys),
    applyAdmission: (input) => applyAdmission(deps, input),
    checkTenantGrant: (input) => checkTenantGrant(deps, input),
    dryRunModel: (input) => dryRunModel(deps, input),
    clusterCapacity: (input) => clusterCapacity(deps, input),
  };
}
