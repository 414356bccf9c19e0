export * from './parse';
export * from './quantities';
export { DNS1123_LABEL } from './rules';
export * from './schema';
export * from './source';
export * from './updates';
