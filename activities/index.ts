export { createActivities } from './create-activities.js';
export type { ActivityDeps, EndpointResolver, EnginePod } from './deps.js';
export type { FerryActivities } from '../workflows/contract/index.js';
