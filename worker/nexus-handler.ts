// The `ferry.models.v1` Nexus service, hosted by Ferry's worker. The long operations start command workflows on this
// worker (their IDs come from the caller's request ID, stable across the caller's retries); the status is answered
// at once from the model's own workflow.
//
// Two forms: `ferryModelsHandler`, for a Ferry without a tenants file (every caller may do everything), on the
// cluster's task queue; and `tenantModelsHandler`, one per tenant, on the task queue that tenant's endpoint targets:
// the queue a request arrived on is who asked (docs/security.md), and the tenant's grant and ownership are checked
// before anything is started.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import * as temporalNexus from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import { typedFailure } from '../client/serving-activities.js';
import { getModelStatus } from '../client/model-status.js';
import {
  describeRef,
  failure,
  FAILURE,
  ferryModelsService,
  formatSpecIssues,
  modelRefOf,
  safeParseServedModel,
  specQuery,
  TENANT_MEMO,
  workflowIdFor,
  type DeleteModelCommandInput,
  type DeleteModelOperationInput,
  type DeleteModelOperationOutput,
  type EnsureModelCommandInput,
  type EnsureModelInput,
  type EnsureModelOutput,
  type FailureType,
  type ModelRef,
  type ServedModel,
} from '../workflows/contract/index.js';
import { gpusOf, grantRefusal, labelledObjects, type TenantGrant } from './tenants.js';

export const ferryModelsHandler = nexus.serviceHandler(ferryModelsService, {
  ensureModel: new temporalNexus.WorkflowRunOperationHandler<EnsureModelInput, EnsureModelOutput>(
    async (ctx, input) => {
      const model = parsed(input.document);
      const requestedBy = requesterOf(ctx);
      return await startEnsure(ctx, model, { document: input.document, timeoutMs: input.timeoutMs, requestedBy });
    },
  ),
  deleteModel: new temporalNexus.WorkflowRunOperationHandler<DeleteModelOperationInput, DeleteModelOperationOutput>(
    async (ctx, input) =>
      await startDelete(ctx, { ref: input.ref, reason: input.reason, requestedBy: requesterOf(ctx) }),
  ),
  getModelStatus: async (_ctx, { ref }) =>
    await getModelStatus(temporalNexus.getClient(), ref).catch((err: unknown) => {
      throw typedFailure(err);
    }),
});

export interface TenantHandlerOptions {
  /** Where the command workflows run: the cluster's own task queue (this handler polls the tenant's). */
  taskQueue: string;
  /** Told of each refusal (a log line and `ferry_tenant_refusals_total`). */
  onRefused?: (refusal: { tenant: string; operation: string; message: string }) => void;
}

/** The service for one tenant: its grant checked, its models only (docs/security.md). */
export function tenantModelsHandler(tenant: TenantGrant, options: TenantHandlerOptions) {
  const refuse = (operation: string, type: FailureType, message: string): never => {
    options.onRefused?.({ tenant: tenant.name, operation, message });
    throw failure(type, message);
  };
  const notFound = (operation: string, ref: ModelRef): never =>
    refuse(operation, FAILURE.ModelNotFound, `${describeRef(ref)}: no such model`);
  return nexus.serviceHandler(ferryModelsService, {
    ensureModel: new temporalNexus.WorkflowRunOperationHandler<EnsureModelInput, EnsureModelOutput>(
      async (ctx, input) => {
        const model = parsed(input.document);
        const client = temporalNexus.getClient();
        // Where and what first: a tenant learns nothing of a namespace it may not serve into.
        const early = grantRefusal(tenant, model);
        if (early) refuse('ensureModel', FAILURE.Forbidden, early);
        const ref = modelRefOf(model);
        const owner = await ownerOf(client, ref, 'running');
        if (owner !== undefined && owner !== tenant.name) {
          refuse(
            'ensureModel',
            FAILURE.Forbidden,
            `tenant ${tenant.name} may not serve ${describeRef(ref)}: the name is taken`,
          );
        }
        const refusal = grantRefusal(tenant, model, await gpusOfOthers(client, tenant.name, ref));
        if (refusal) refuse('ensureModel', FAILURE.Forbidden, refusal);
        return await startEnsure(
          ctx,
          model,
          {
            document: input.document,
            timeoutMs: input.timeoutMs,
            tenant: tenant.name,
            requestedBy: requesterOf(ctx, tenant.name),
            // Secrets or PVCs its grant allows by label: the model's cluster reads their labels before anything else.
            ...(labelledObjects(tenant, model).length > 0 ? { checkGrantOn: model.spec.cluster } : {}),
          },
          options.taskQueue,
        );
      },
    ),
    deleteModel: new temporalNexus.WorkflowRunOperationHandler<DeleteModelOperationInput, DeleteModelOperationOutput>(
      async (ctx, input) => {
        const ref = refOf(input.ref);
        if ((await ownerOf(temporalNexus.getClient(), ref)) !== tenant.name) notFound('deleteModel', ref);
        const requestedBy = requesterOf(ctx, tenant.name);
        return await startDelete(
          ctx,
          { ref, reason: input.reason, tenant: tenant.name, requestedBy },
          options.taskQueue,
        );
      },
    ),
    getModelStatus: async (_ctx, input) => {
      const ref = refOf(input.ref);
      const client = temporalNexus.getClient();
      // The owner from the memo first: another's model is not asked anything (nor its worker's absence told).
      if ((await ownerOf(client, ref)) !== tenant.name) notFound('getModelStatus', ref);
      const status = await getModelStatus(client, ref).catch((err: unknown) => {
        throw typedFailure(err);
      });
      return status.tenant === tenant.name ? status : notFound('getModelStatus', ref);
    },
  });
}

/**
 * Who asked, for the model's timeline and Events: the tenant, which the endpoint proves, and the caller workflow the
 * request's links name, which only the caller says (a link is the caller's SDK's, or anyone's on the HTTP API).
 */
function requesterOf(ctx: Pick<nexus.StartOperationContext, 'inboundLinks'>, tenant?: string): string {
  const callers = ctx.inboundLinks.flatMap((link) => {
    const match = /^\/namespaces\/([^/]+)\/workflows\/([^/]+)\//.exec(link.url.pathname);
    if (!match) return [];
    try {
      return [`${decodeURIComponent(match[1]!)}/${decodeURIComponent(match[2]!)}`];
    } catch {
      return [];
    }
  });
  const caller = callers.length > 0 ? `caller ${callers[0]}, as its links say` : 'no caller named';
  return tenant !== undefined ? `tenant ${tenant} through Nexus (${caller})` : `Nexus (${caller})`;
}

function parsed(document: unknown): ServedModel {
  const result = safeParseServedModel(document);
  if (!result.ok) throw new nexus.HandlerError('BAD_REQUEST', formatSpecIssues(result.issues));
  return result.model;
}

/** Only the three fields of a reference, each a string: a caller's input is not trusted to be one. */
function refOf(ref: unknown): ModelRef {
  const { cluster, namespace, name } = (typeof ref === 'object' && ref !== null ? ref : {}) as Partial<ModelRef>;
  if (typeof cluster !== 'string' || typeof namespace !== 'string' || typeof name !== 'string') {
    throw new nexus.HandlerError('BAD_REQUEST', 'ref must be { cluster, namespace, name }, each a string');
  }
  return { cluster, namespace, name };
}

async function startEnsure(
  ctx: nexus.StartOperationContext,
  model: ServedModel,
  input: EnsureModelCommandInput,
  taskQueue?: string,
) {
  return await temporalNexus.startWorkflow(ctx, 'ensureModelWorkflow', {
    args: [input],
    workflowId: `ensure/${workflowIdFor(modelRefOf(model))}/${ctx.requestId}`,
    ...(taskQueue ? { taskQueue } : {}),
  });
}

async function startDelete(ctx: nexus.StartOperationContext, input: DeleteModelCommandInput, taskQueue?: string) {
  return await temporalNexus.startWorkflow(ctx, 'deleteModelWorkflow', {
    args: [input],
    workflowId: `delete/${workflowIdFor(input.ref)}/${ctx.requestId}`,
    ...(taskQueue ? { taskQueue } : {}),
  });
}

/**
 * The tenant that owns the model's latest run (its memo), `''` for a run no tenant owns, undefined when there is
 * none (`running`: none running). A deleted model's run still names its owner, whose delete then finds it deleted.
 */
async function ownerOf(
  client: Client,
  ref: ModelRef,
  which: 'running' | 'latest' = 'latest',
): Promise<string | undefined> {
  try {
    const described = await client.workflow.getHandle(workflowIdFor(ref)).describe();
    if (which === 'running' && described.status.name !== 'RUNNING') return undefined;
    const owner = described.memo?.[TENANT_MEMO];
    return typeof owner === 'string' ? owner : '';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** How long the quota waits for one model's spec. */
const QUERY_DEADLINE_MS = 10_000;

const RUNNING_MODELS = 'WorkflowType = "ServeModelWorkflow" AND ExecutionStatus = "Running"';

/** GPUs the tenant's other running models hold (each model's spec, asked of its workflow). */
async function gpusOfOthers(client: Client, tenant: string, except: ModelRef): Promise<number> {
  let total = 0;
  const skip = workflowIdFor(except);
  for await (const run of client.workflow.list({ query: RUNNING_MODELS })) {
    if (run.workflowId === skip || run.memo?.[TENANT_MEMO] !== tenant) continue;
    try {
      // A model whose cluster has no worker answers no query: the deadline turns that into a refusal to retry.
      const spec = await client.withDeadline(Date.now() + QUERY_DEADLINE_MS, () =>
        client.workflow.getHandle(run.workflowId).query(specQuery),
      );
      total += gpusOf(spec);
    } catch (err) {
      // Not counted is not allowed: the caller's retry asks again.
      throw new nexus.HandlerError(
        'UNAVAILABLE',
        `cannot count the GPUs of ${run.workflowId} for tenant ${tenant}'s quota: ${(err as Error).message}`,
      );
    }
  }
  return total;
}
