// The tenants file: which teams may serve what, where, through which Nexus endpoint (docs/security.md). Written by
// Ferry's admins, read once at the worker's start and refused whole if any part is wrong; `grantRefusal` checks a
// document against one tenant's grant. Deny by default: what a grant does not name is refused.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { formatSpecIssues, type ServedModel } from '../workflows/contract/index.js';
import { dnsLabel, int, labelMap, objectName, quote, strict } from '../workflows/contract/spec/rules.js';

/** Objects of a grant by their labels: those in the model's namespace that carry all of them. */
const labelSelector = strict({
  matchLabels: labelMap('label').refine((labels) => Object.keys(labels).length > 0, {
    error: 'must name at least one label (an empty selector would allow every object)',
  }),
});

/** Names, or label selectors (`{matchLabels: {…}}`), of the objects a tenant's documents may name. */
const objectGrants = (what: string, example: string) =>
  z
    .array(
      z.union([objectName(what, example), labelSelector], { error: `must be a ${what} name or {matchLabels: {…}}` }),
    )
    .default([])
    .describe(`The ${what}s its documents may name: by name, or by labels the object carries.`);

/** `free`, or the names allowed. */
const allowList = (what: string) =>
  z
    .union([z.literal('free'), z.array(z.string().min(1, 'must not be empty'))], {
      error: `must be "free" or a list of ${what}`,
    })
    .default([]);

const grantSchema = strict({
  nexusTaskQueue: z
    .string({ error: 'is required: the task queue its Nexus endpoint targets, like ferry-nexus-team-a' })
    .regex(/^[A-Za-z0-9][\w.-]{0,199}$/, 'must be a task queue name like ferry-nexus-team-a'),
  clusters: z.array(dnsLabel('cluster name', 'gpu-east')).min(1, 'must name at least one cluster'),
  namespaces: z.array(dnsLabel('namespace name', 'team-a')).min(1, 'must name at least one namespace'),
  images: strict({
    repositories: z
      .array(z.string().min(1, 'must not be empty'))
      .min(1, 'must name at least one repository prefix, like registry.example.com/team-a/'),
    digestsOnly: z.boolean().default(false),
  }),
  gpus: strict({
    perModel: int('a whole number of GPUs').min(0, 'must be 0 or more'),
    total: int('a whole number of GPUs').min(0, 'must be 0 or more'),
  }),
  secrets: objectGrants('Secret', 'hf-token'),
  pvcs: objectGrants('PersistentVolumeClaim', 'checkpoints'),
  engineArgs: allowList('vLLM flags, like --max-model-len'),
  env: allowList('environment variable names'),
  storageClasses: z
    .array(objectName('StorageClass', 'fast-ssd'))
    .default([])
    .describe("StorageClasses storage.storageClassName may name; the cluster's default class (null) always."),
  tolerations: allowList('taint keys, like nvidia.com/gpu'),
});

const fileSchema = strict({
  tenants: z.record(dnsLabel('tenant name', 'team-a'), grantSchema),
});

export type TenantGrant = z.output<typeof grantSchema> & { name: string };
export type Tenants = TenantGrant[];

/** A tenants file that cannot be used; the message names every problem. */
export class TenantsFileError extends Error {
  override readonly name = 'TenantsFileError';
}

/** Reads and checks the tenants file at `path` (YAML or JSON). */
export function loadTenants(path: string): Tenants {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TenantsFileError(`tenants file ${path}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new TenantsFileError(`tenants file ${path} is not YAML: ${(err as Error).message}`);
  }
  return parseTenants(data, path);
}

export function parseTenants(data: unknown, source = 'tenants'): Tenants {
  const parsed = fileSchema.safeParse(data);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => ({
      path: issue.path.map(String).join('.'),
      // zod words a missing field as a type error ("expected array, received undefined").
      message:
        issue.code === 'invalid_type' && /received undefined$/.test(issue.message) ? 'is required' : issue.message,
    }));
    throw new TenantsFileError(`${source}: ${formatSpecIssues(issues)}`);
  }
  const tenants = Object.entries(parsed.data.tenants).map(([name, grant]) => ({ ...grant, name }));
  const queues = new Map<string, string>();
  for (const tenant of tenants) {
    const other = queues.get(tenant.nexusTaskQueue);
    if (other) {
      throw new TenantsFileError(
        `${source}: tenants ${other} and ${tenant.name} have the same nexusTaskQueue ${quote(tenant.nexusTaskQueue)}: a request on it could not tell them apart`,
      );
    }
    queues.set(tenant.nexusTaskQueue, tenant.name);
    if (tenant.gpus.perModel > tenant.gpus.total) {
      throw new TenantsFileError(
        `${source}: tenants.${tenant.name}.gpus.perModel (${tenant.gpus.perModel}) is more than its total (${tenant.gpus.total})`,
      );
    }
  }
  return tenants;
}

/** GPUs a model holds when all its replicas run. */
export function gpusOf(model: ServedModel): number {
  return model.spec.resources.gpus * model.spec.replicas;
}

/**
 * Why `tenant` may not serve `model`, in one line naming the rule, or undefined when its grant allows it. `othersGpus`
 * is what the tenant's other running models hold; unset, the total is not checked.
 */
export function grantRefusal(tenant: TenantGrant, model: ServedModel, othersGpus?: number): string | undefined {
  const who = `tenant ${tenant.name}`;
  const { spec, metadata } = model;
  if (!tenant.clusters.includes(spec.cluster)) return `${who} may not serve into cluster ${spec.cluster}`;
  if (!tenant.namespaces.includes(metadata.namespace))
    return `${who} may not serve into namespace ${metadata.namespace}`;
  for (const [field, image] of imagesOf(model)) {
    if (!tenant.images.repositories.some((prefix) => image.startsWith(prefix))) {
      return `${who} may not run image ${quote(image)} (${field}): allowed are ${tenant.images.repositories.map(quote).join(', ')}`;
    }
    if (tenant.images.digestsOnly && !/@sha256:[0-9a-f]{64}$/.test(image)) {
      return `${who} may run images only by digest (${field}: ${quote(image)} has no @sha256:…)`;
    }
  }
  const gpus = gpusOf(model);
  if (gpus > tenant.gpus.perModel) {
    return `${who} may hold ${tenant.gpus.perModel} GPUs per model, this one asks for ${gpus} (resources.gpus × replicas)`;
  }
  if (othersGpus !== undefined && othersGpus + gpus > tenant.gpus.total) {
    return `${who} may hold ${tenant.gpus.total} GPUs in total; its other models hold ${othersGpus}, this one asks for ${gpus}`;
  }
  // A name the grant does not list may still be allowed by its object's labels: labelledObjects names those, and the
  // model's cluster reads them (labelRefusal).
  for (const [field, secret] of secretsOf(model)) {
    if (!namesOf(tenant.secrets).includes(secret) && selectorsOf(tenant.secrets).length === 0)
      return `${who} may not read Secret ${secret} (${field})`;
  }
  for (const [field, claim] of claimsOf(model)) {
    if (!namesOf(tenant.pvcs).includes(claim) && selectorsOf(tenant.pvcs).length === 0)
      return `${who} may not mount PersistentVolumeClaim ${claim} (${field})`;
  }
  const storageClass = spec.storage.storageClassName;
  if (storageClass && !tenant.storageClasses.includes(storageClass)) {
    const allowed = tenant.storageClasses.length
      ? `: allowed are ${tenant.storageClasses.join(', ')} and`
      : ': allowed is only';
    return `${who} may not use StorageClass ${storageClass} (storage.storageClassName)${allowed} the cluster's default class (null)`;
  }
  // A taint is what reserves nodes (another team's, a pool kept free): a toleration is a way onto them.
  if (tenant.tolerations !== 'free') {
    const allowed = tenant.tolerations;
    for (const toleration of spec.scheduling.tolerations) {
      if (!toleration.key)
        return `${who} may not tolerate every taint (scheduling.tolerations: a toleration with no key)`;
      if (!allowed.includes(toleration.key))
        return `${who} may not tolerate taint ${toleration.key} (scheduling.tolerations)${allowedText(allowed)}`;
    }
  }
  if (tenant.engineArgs !== 'free') {
    const flag = flagsOf(spec.engine.args).find((name) => !(tenant.engineArgs as string[]).includes(name));
    if (flag) return `${who} may not pass ${flag} in engine.args${allowedText(tenant.engineArgs)}`;
  }
  if (tenant.env !== 'free') {
    const allowed = tenant.env;
    for (const [field, list] of [
      ['engine.env', spec.engine.env],
      ['puller.env', spec.puller.env],
    ] as const) {
      const variable = list.find((v) => !allowed.includes(v.name));
      if (variable) return `${who} may not set ${variable.name} in ${field}${allowedText(allowed)}`;
    }
  }
  return undefined;
}

type ObjectGrants = TenantGrant['secrets'];
type Selector = Exclude<ObjectGrants[number], string>;
const namesOf = (grants: ObjectGrants): string[] => grants.filter((g): g is string => typeof g === 'string');
const selectorsOf = (grants: ObjectGrants): Selector[] => grants.filter((g): g is Selector => typeof g !== 'string');

/** A Secret or PVC of the document that the grant allows only if the object's labels match one of its selectors. */
export interface LabelledObject {
  kind: 'Secret' | 'PersistentVolumeClaim';
  name: string;
  /** Where the document names it. */
  field: string;
}

/** The Secrets and PVCs `model` names that `tenant`'s grant does not list by name but may allow by their labels. */
export function labelledObjects(tenant: TenantGrant, model: ServedModel): LabelledObject[] {
  const found: LabelledObject[] = [];
  const add = (kind: LabelledObject['kind'], grants: ObjectGrants, named: [string, string][]) => {
    if (selectorsOf(grants).length === 0) return;
    for (const [field, name] of named) {
      if (!namesOf(grants).includes(name) && !found.some((o) => o.kind === kind && o.name === name))
        found.push({ kind, name, field });
    }
  };
  add('Secret', tenant.secrets, secretsOf(model));
  add('PersistentVolumeClaim', tenant.pvcs, claimsOf(model));
  return found;
}

/**
 * Why the labels of `labelledObjects(tenant, model)`, as the model's cluster has them (`labelsOf`: undefined when
 * there is no such object in the model's namespace), do not let the tenant name them; undefined when they do.
 */
export function labelRefusal(
  tenant: TenantGrant,
  model: ServedModel,
  labelsOf: (kind: LabelledObject['kind'], name: string) => Record<string, string> | undefined,
): string | undefined {
  const who = `tenant ${tenant.name}`;
  const ns = model.metadata.namespace;
  for (const { kind, name, field } of labelledObjects(tenant, model)) {
    const selectors = selectorsOf(kind === 'Secret' ? tenant.secrets : tenant.pvcs);
    const verb = kind === 'Secret' ? 'read' : 'mount';
    const labels = labelsOf(kind, name);
    if (labels === undefined) {
      return `${who} may not ${verb} ${kind} ${name} (${field}): it is not listed, and there is no such ${kind} in namespace ${ns} whose labels could allow it`;
    }
    const allowed = selectors.some((s) => Object.entries(s.matchLabels).every(([k, v]) => labels[k] === v));
    if (!allowed) {
      const wanted = selectors.map((s) =>
        Object.entries(s.matchLabels)
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      );
      return `${who} may not ${verb} ${kind} ${name} (${field}): it is not listed, and its labels match none of ${wanted.map(quote).join(', ')}`;
    }
  }
  return undefined;
}

function allowedText(allowed: string[]): string {
  return allowed.length === 0 ? ' (its grant allows none)' : ` (allowed: ${allowed.join(', ')})`;
}

function imagesOf(model: ServedModel): [string, string][] {
  const { engine, puller } = model.spec;
  return [
    ['engine.image', engine.image],
    ...(puller.image ? [['puller.image', puller.image] as [string, string]] : []),
  ];
}

function secretsOf(model: ServedModel): [string, string][] {
  const { source, engine, puller } = model.spec;
  const found: [string, string][] = [];
  if (source.huggingface?.tokenSecret)
    found.push(['source.huggingface.tokenSecret', source.huggingface.tokenSecret.name]);
  if (source.s3?.credentialsSecret) found.push(['source.s3.credentialsSecret', source.s3.credentialsSecret.name]);
  if (source.oci?.credentialsSecret) found.push(['source.oci.credentialsSecret', source.oci.credentialsSecret.name]);
  if (engine.apiKeySecret) found.push(['engine.apiKeySecret', engine.apiKeySecret.name]);
  for (const [field, list] of [
    ['engine.env', engine.env],
    ['puller.env', puller.env],
  ] as const) {
    for (const variable of list) {
      const ref = variable.valueFrom?.secretKeyRef;
      if (ref) found.push([`${field} ${variable.name}`, ref.name]);
    }
  }
  for (const adapter of engine.lora.adapters ?? []) {
    const secret =
      adapter.source.huggingface?.tokenSecret ??
      adapter.source.s3?.credentialsSecret ??
      adapter.source.oci?.credentialsSecret;
    if (secret) found.push([`engine.lora.adapters ${adapter.name}`, secret.name]);
  }
  return found;
}

function claimsOf(model: ServedModel): [string, string][] {
  const { source, engine } = model.spec;
  return [
    ...(source.pvc ? [['source.pvc', source.pvc.claimName] as [string, string]] : []),
    ...(engine.lora.adapters ?? []).flatMap((adapter) =>
      adapter.source.pvc
        ? [[`engine.lora.adapters ${adapter.name}`, adapter.source.pvc.claimName] as [string, string]]
        : [],
    ),
  ];
}

/** The flags of `args` as vLLM reads them: before "=", underscores as dashes; values are not flags. */
function flagsOf(args: readonly string[]): string[] {
  return args
    .filter((arg) => arg.startsWith('-') && !/^-\d*\.?\d+$/.test(arg))
    .map((arg) => {
      const name = arg.split('=', 1)[0]!;
      return name.startsWith('--') ? name.replace(/_/g, '-') : name;
    });
}
