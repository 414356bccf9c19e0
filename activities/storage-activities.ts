import { claimName } from './claim';
import type { ActivityDeps } from './deps';
import { awaitPuller, startPuller } from './puller';
import { releaseVolume } from './release';
import { applyStorage } from './storage';
import type { FerryActivities } from '../workflows/contract';

export type StorageActivities = Pick<
  FerryActivities,
  'claimName' | 'applyStorage' | 'startPuller' | 'awaitPuller' | 'releaseVolume'
>;

/** The activities up to the engine: claim the name, provide the volume, pull the weights, release the volume. */
export function createStorageActivities(deps: ActivityDeps): StorageActivities {
  return {
    claimName: (input) => claimName(deps, input),
    applyStorage: (input) => applyStorage(deps, input),
    startPuller: (input) => startPuller(deps, input),
    awaitPuller: (input) => awaitPuller(deps, input),
    releaseVolume: (input) => releaseVolume(deps, input),
  };
}
