export { realActivities } from './activities.js';
export { parseWorkerConfig, redactWorkerConfig, WORKER_USAGE, WorkerConfigError, type WorkerConfig } from './config.js';
export { createWorker, type FerryWorker, type WorkerOverrides } from './create-worker.js';
export { JsonLogger } from './logger.js';
export { modelEventsSinks, type ModelEventsDeps } from './model-events.js';
