// The second half of a model's activities: the engine (apply, roll out, answer, scale), its status, and teardown.
import type { ActivityDeps } from './deps';
import { applyEngine, scaleEngine } from './engine';
import { awaitHealth, type ApiKeyResolver } from './health';
import { readStatus } from './read-status';
import { awaitRollout } from './rollout';
import { tearDown } from './teardown';
import type { FerryActivities } from '../workflows/contract';

export type EngineActivities = Pick<
  FerryActivities,
  'applyEngine' | 'awaitRollout' | 'awaitHealth' | 'scaleEngine' | 'readStatus' | 'tearDown'
>;

export interface EngineActivityOptions {
  /** Where the worker gets a model's API key for /v1/models, if anywhere (`apiKeyFromSecret`); usually unset. */
  apiKeys?: ApiKeyResolver;
}

export function createEngineActivities(deps: ActivityDeps, options: EngineActivityOptions = {}): EngineActivities {
  return {
    applyEngine: (input) => applyEngine(deps, input),
    awaitRollout: (input) => awaitRollout(deps, input),
    awaitHealth: (input) => awaitHealth(deps, input, options.apiKeys),
    scaleEngine: (input) => scaleEngine(deps, input),
    readStatus: (input) => readStatus(deps, input, options.apiKeys),
    tearDown: (input) => tearDown(deps, input),
  };
}
