// What every command has: the connected client, the I/O, the update already sent if any, and a helper to name a model.
import type { Client } from '@temporalio/client';
import type { EarlyUpdate } from '../early-update.js';
import { DEFAULT_CLUSTER, type ModelRef, webUiLinkFor, workflowIdFor } from '../../workflows/contract/index.js';
import { listModels } from '../list-models.js';
import { type RefArgs, UsageError } from './args.js';
import type { CliIO } from './io.js';

export interface CliContext {
  client: Client;
  io: CliIO;
  /** The Temporal Web UI's base URL (TEMPORAL_UI_URL, or the local stack's), for links to a model's workflow. */
  webUiUrl?: string;
  /** The command's update, sent before the SDK loaded (`cli/prepare.ts`): the command goes on under its ID. */
  early?: EarlyUpdate;
  /** With --request-timeout: the first request that ran out of it (`request-timeout.ts`), if one did. */
  requestTimedOut?: () => string | undefined;
}

/** The model's workflow in the Web UI, when its URL is known. */
export function webUiLink(ctx: CliContext, ref: ModelRef): string | undefined {
  if (!ctx.webUiUrl) return undefined;
  return webUiLinkFor(ctx.webUiUrl, ctx.client.options.namespace, workflowIdFor(ref));
}

/**
 * The model a command names. Without --cluster: the running model of that name and namespace on any cluster, else
 * the latest deleted one (visibility), else the cluster in FERRY_CLUSTER, else `default`.
 */
export async function resolveRef(ctx: CliContext, args: RefArgs): Promise<ModelRef> {
  const { name, namespace } = args;
  if (args.cluster) return { name, namespace, cluster: args.cluster };
  const found = await listModels(ctx.client, { name, namespace, includeClosed: true }, { limit: 20 });
  const running = [...new Set(found.filter((m) => m.execution === 'RUNNING').map((m) => m.cluster))];
  if (running.length > 1) {
    throw new UsageError(`${namespace}/${name} runs on clusters ${running.join(', ')}: pick one with --cluster`);
  }
  const cluster = running[0] ?? found[0]?.cluster ?? ctx.io.env.FERRY_CLUSTER ?? DEFAULT_CLUSTER;
  return { name, namespace, cluster };
}
