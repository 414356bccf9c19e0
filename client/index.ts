export { applyModel, type ApplyOptions, type ApplyResult } from './apply-model';
export { connectFromEnv, connectWith, connectHint, type ConnectFromEnvOptions } from './connect';
export { deleteModel, DEFAULT_DELETE_TIMEOUT_MS, type DeleteModelResult, type DeleteOptions } from './delete-model';
export { parseModelDocument, parseModelYaml } from './document';
export {
  ConnectError,
  describeRef,
  FerryClientError,
  InvalidSpecError,
  ModelDeletedError,
  ModelFailedError,
  ModelNotFoundError,
  ModelWorkflowClosedError,
  NoWorkerError,
  SpecConflictError,
  WaitTimeoutError,
} from './errors';
export { listModels, listQuery, type ListFilter, type ListOptions, type ModelSummary } from './list-models';
export { readLocalStackEnv } from './local-stack';
export { describeModel, getModelStatus, modelHandle, type ModelHandle } from './model-status';
export { defaultReadyTimeoutMs, serveModel, WORKFLOW_TYPE, type ServeOptions, type ServeResult } from './serve-model';
export {
  connectOptionsOf,
  redactTemporalSettings,
  temporalSettingsFromEnv,
  type TemporalOverrides,
  type TemporalSettings,
} from './temporal-env';
export { updateModel, type UpdateModelResult, type UpdateOptions } from './update-model';
export { waitForPhase, type WaitOptions } from './wait-for-phase';
export type { ModelRef, ServeModelOptions } from '../workflows/contract';
export type { ModelStatus, Phase } from '../workflows/contract';
