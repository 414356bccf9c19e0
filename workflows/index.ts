export { ServeModelWorkflow } from './serve-model.js';
export { deleteModelWorkflow, ensureModelWorkflow } from './commands.js';
