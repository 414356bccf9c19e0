export * from './parse';
export * from './quantities';
export * from './schema';
export * from './source';
export * from './updates';
