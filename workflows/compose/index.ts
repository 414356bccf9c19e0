export * from '../contract/index.js';
export * from './apply-served-model.js';
export * from './evaluate-checkpoint.js';
export * from './serve-as-child.js';
export * from './with-served-model.js';
