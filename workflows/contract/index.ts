export * from './activities';
export * from './failures';
export * from './format';
export * from './identity';
export * from './messages';
export * from './spec';
export * from './status';
