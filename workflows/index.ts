export { ServeModelWorkflow } from './serve-model.js';
