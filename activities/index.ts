export { createActivities } from './create-activities.js';
export type { ActivityDeps, EndpointResolver } from './deps.js';
export type { FerryActivities } from '../workflows/contract/index.js';
