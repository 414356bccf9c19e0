// Patches under Worker Versioning (docs/design/upgrades.md). A run on a versioned worker is pinned: it replays only on
// the version of the code that wrote its history, so it needs no patch marker — each `patched()` of a new run costs two
// history events (the marker and its search attribute), in every run, continued ones too. Runs on an unversioned
// worker (before Worker Versioning, or with it off) still record and read markers as before.
import type { WorkflowDefinitionOptions } from '@temporalio/common';
import { patched, workflowInfo } from '@temporalio/workflow';

/**
 * Whether the workflow task at hand was (or, in replay, was recorded as) run by a version of a Worker Deployment; the
 * SDK makes this deterministic for branching. An unversioned worker has a build ID too, but no deployment name.
 */
export function onVersionedWorker(): boolean {
  return !!workflowInfo().currentDeploymentVersion?.deploymentName;
}

/** `patched(id)` on an unversioned worker; on a versioned one, true with no marker (the run is pinned to this code). */
export function patchedUnlessPinned(id: string): boolean {
  return onVersionedWorker() || patched(id);
}

/**
 * A workflow type's versioning behaviour, for `setWorkflowOptions`: given only on a versioned worker (an unversioned one
 * fails every workflow task that names one). Read once, at the run's first task.
 */
export function whenVersioned(
  versioningBehavior: NonNullable<WorkflowDefinitionOptions['versioningBehavior']>,
): () => WorkflowDefinitionOptions {
  return () => (onVersionedWorker() ? { versioningBehavior } : {});
}
