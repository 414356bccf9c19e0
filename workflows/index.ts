export { ServeModelWorkflow } from './serve-model.js';
export { deleteModelWorkflow, ensureModelWorkflow } from './commands.js';
export { dryRunModelWorkflow } from './dry-run.js';
export { MoveModelWorkflow } from './move.js';
export { PlaceModelWorkflow } from './place.js';
