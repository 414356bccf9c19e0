export { applyModel, type ApplyOptions, type ApplyResult } from './apply-model.js';
export { createServingActivities } from './serving-activities.js';
export { connectFromEnv, connectWith, connectHint, type ConnectFromEnvOptions } from './connect.js';
export { dryRunModel, type DryRunModelResult, type DryRunOptions } from './dry-run-model.js';
export { deleteModel, DEFAULT_DELETE_TIMEOUT_MS, type DeleteModelResult, type DeleteOptions } from './delete-model.js';
export { parseModelDocument, parseModelYaml } from './document.js';
export {
  ConnectError,
  describeRef,
  FerryClientError,
  InvalidSpecError,
  ModelDeletedError,
  ModelFailedError,
  ModelExistsError,
  ModelNotFoundError,
  ModelWorkflowClosedError,
  NoCapacityError,
  NoRolloutError,
  NoWorkerError,
  SpecConflictError,
  WaitTimeoutError,
} from './errors.js';
export { listModels, listQuery, type ListFilter, type ListOptions, type ModelSummary } from './list-models.js';
export { readLocalStackEnv } from './local-stack.js';
export {
  abortMove,
  MoveFailedError,
  moveHandle,
  moveModel,
  MoveRefusedError,
  moveResult,
  moveStatus,
  startMove,
  type MoveHandle,
  type MoveOptions,
} from './move-model.js';
export { servingCluster, type Placement } from './place-model.js';
export { SourceDocumentError } from './source-document.js';
export { describeModel, getModelStatus, modelHandle, type ModelHandle } from './model-status.js';
export {
  defaultReadyTimeoutMs,
  serveModel,
  WORKFLOW_TYPE,
  type ServeOptions,
  type ServeResult,
} from './serve-model.js';
export {
  connectOptionsOf,
  redactTemporalSettings,
  temporalSettingsFromEnv,
  type TemporalOverrides,
  type TemporalSettings,
} from './temporal-env.js';
export { rolloutAction, type RolloutActionOptions } from './rollout-model.js';
export { updateModel, type UpdateModelResult, type UpdateOptions } from './update-model.js';
export { waitForPhase, type WaitOptions } from './wait-for-phase.js';
export type { DryRunObject, ModelRef, ServeModelOptions } from '../workflows/contract/index.js';
export type { ModelStatus, Phase } from '../workflows/contract/index.js';
export type { MoveModelResult, MoveStatus, MoveStep } from '../workflows/contract/index.js';
export type { ClusterReading, NodeCapacity } from '../workflows/contract/index.js';
