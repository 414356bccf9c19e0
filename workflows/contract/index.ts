export * from './activities.js';
export * from './failures.js';
export * from './format.js';
export * from './identity.js';
export * from './messages.js';
export * from './serving.js';
export * from './spec/index.js';
export * from './status.js';
