export { DOCUMENT_LIMITS } from './input.js';
export * from './parse.js';
export * from './quantities.js';
export { DNS1123_LABEL } from './rules.js';
export * from './schema.js';
export * from './source.js';
export * from './updates.js';
