export { ServeModelWorkflow } from './serve-model';
