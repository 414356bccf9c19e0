import type { ActivityDeps } from './deps';
import { createEngineActivities } from './engine-activities';
import { createStorageActivities } from './storage-activities';
import type { FerryActivities } from '../workflows/contract';

/** Every activity of a ServeModelWorkflow, bound to one cluster's clients. */
export function createActivities(deps: ActivityDeps): FerryActivities {
  return { ...createStorageActivities(deps), ...createEngineActivities(deps) };
}
