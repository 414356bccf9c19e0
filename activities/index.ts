export { createActivities } from './create-activities';
export type { ActivityDeps, EndpointResolver } from './deps';
export type { FerryActivities } from '../workflows/contract';
