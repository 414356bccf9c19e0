// A container's launch as a kubelet and container runtime prepare it: the user and groups its security context names,
// its environment (the image's, envFrom, env with `$(VAR)` expansion and field refs), mounts, limits and argv.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Container } from '@kubernetes/client-node';
import { parseQuantity } from '../../../workflows/contract/spec/quantities.js';
import type { ImageRuntime } from './images.js';
import type { PodContext, Slot } from './pod-context.js';
import type { ContainerProcess } from './sandbox.js';

const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;

/** `$(VAR)` references expanded as the kubelet expands them in env values, command and args; `$$` is a `$`. */
function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name?: string) =>
    name === undefined ? '$' : (env[name] ?? all),
  );
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '');
}

/** Image users first, then the host's entries that do not clash with them by name or id. */
function mergeAccounts(image: string[], host: string): string {
  const names = new Set(image.map((l) => l.split(':')[0]));
  const ids = new Set(image.map((l) => l.split(':')[2]));
  const kept = lines(host).filter((l) => !names.has(l.split(':')[0]) && !ids.has(l.split(':')[2]));
  return `${[...image, ...kept].join('\n')}\n`;
}

/** The launch of one run, or why it cannot start (CreateContainerConfigError). */
export async function launchOf(
  ctx: PodContext,
  slot: Slot,
  image: ImageRuntime,
  volumes: Map<string, string>,
): Promise<{ launch: ConstructorParameters<typeof ContainerProcess>[0] } | { reason: string; message: string }> {
  const spec = slot.spec;
  const podSc = ctx.pod().spec?.securityContext ?? {};
  const sc = spec.securityContext ?? {};
  const uid = sc.runAsUser ?? podSc.runAsUser ?? image.user.uid;
  const gid = sc.runAsGroup ?? podSc.runAsGroup ?? image.user.gid;
  if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) && uid === 0) {
    return {
      reason: 'CreateContainerConfigError',
      message: `container has runAsNonRoot and image will run as root (pod: "${ctx.pod().metadata!.name}_${ctx.pod().metadata!.namespace}(${ctx.uid})", container: ${spec.name})`,
    };
  }
  const resolved = await envOf(ctx, spec, image);
  if (!('env' in resolved)) return resolved;
  const env = resolved.env;
  const passwd = mergeAccounts(image.passwd, readFileSync('/etc/passwd', 'utf8'));
  const group = mergeAccounts(image.group, readFileSync('/etc/group', 'utf8'));
  const home =
    lines(passwd)
      .find((l) => l.split(':')[2] === String(uid))
      ?.split(':')[5] || '/';
  if (!env.HOME) env.HOME = home;
  const mounts = [];
  for (const m of spec.volumeMounts ?? []) {
    const source = volumes.get(m.name);
    if (!source)
      return { reason: 'CreateContainerConfigError', message: `volume "${m.name}" is not a volume of the pod` };
    mounts.push({
      source: m.subPath ? join(source, m.subPath) : source,
      target: m.mountPath,
      readOnly: m.readOnly === true,
    });
  }
  const limits = spec.resources?.limits ?? {};
  const memory = limits.memory ? parseQuantity(String(limits.memory)) : undefined;
  const cpu = limits.cpu ? parseQuantity(String(limits.cpu)) : undefined;
  const command = (spec.command?.length ? spec.command : image.entrypoint).map((a) => expand(a, env));
  const args = (spec.command?.length ? (spec.args ?? []) : (spec.args ?? image.cmd)).map((a) => expand(a, env));
  const logDir = join(ctx.dir, 'logs', spec.name);
  mkdirSync(logDir, { recursive: true });
  const fsGroup = podSc.fsGroup;
  const groups = [...new Set([...(fsGroup !== undefined ? [fsGroup] : []), ...(podSc.supplementalGroups ?? [])])];
  return {
    launch: {
      id: `${ctx.uid.slice(0, 12)}-${spec.name}`,
      dir: join(ctx.dir, 'containers', spec.name),
      netns: ctx.address()!.namespace,
      argv: [...command, ...args],
      env,
      workingDir: spec.workingDir || image.workingDir,
      uid,
      gid,
      groups,
      noNewPrivs: sc.allowPrivilegeEscalation === false,
      home,
      passwd,
      group,
      hostname: ctx.pod().spec?.hostname ?? ctx.pod().metadata!.name!,
      hosts: `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${ctx.address()!.ip}\t${ctx.pod().metadata!.name}\n`,
      runtimeBinds: image.binds,
      mounts,
      shmBytes: DEFAULT_SHM_BYTES,
      ...(memory !== undefined ? { memoryLimitBytes: Math.floor(memory) } : {}),
      ...(cpu !== undefined ? { cpuLimitMillis: Math.ceil(cpu * 1000) } : {}),
      logFile: join(logDir, `${slot.restartCount}.log`),
      terminationFile: join(logDir, `${slot.restartCount}.termination`),
      terminationMessagePath: spec.terminationMessagePath || '/dev/termination-log',
    },
  };
}

/** The container's environment: the image's, then envFrom, then env, with the kubelet's errors for missing keys. */
async function envOf(
  ctx: PodContext,
  spec: V1Container,
  image: ImageRuntime,
): Promise<{ env: Record<string, string> } | { reason: string; message: string }> {
  const namespace = ctx.pod().metadata!.namespace!;
  const env: Record<string, string> = { ...image.env, HOSTNAME: ctx.pod().metadata!.name! };
  const core = ctx.host.core;
  const read = async (kind: 'Secret' | 'ConfigMap', name: string) => {
    if (kind === 'Secret') {
      const s = await core.readNamespacedSecret({ name, namespace });
      return Object.fromEntries(
        Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
      );
    }
    return (await core.readNamespacedConfigMap({ name, namespace })).data ?? {};
  };
  const missing = (kind: string, name: string) => ({
    reason: 'CreateContainerConfigError',
    message: `${kind.toLowerCase()} "${name}" not found`,
  });
  for (const from of spec.envFrom ?? []) {
    const ref = from.secretRef ?? from.configMapRef;
    const kind = from.secretRef ? 'Secret' : 'ConfigMap';
    const data = await read(kind, ref!.name!).catch(() => undefined);
    if (!data) {
      if (ref!.optional) continue;
      return missing(kind, ref!.name!);
    }
    for (const [k, v] of Object.entries(data)) env[`${from.prefix ?? ''}${k}`] = v;
  }
  for (const variable of spec.env ?? []) {
    const from = variable.valueFrom;
    if (!from) {
      env[variable.name] = expand(variable.value ?? '', env);
      continue;
    }
    const keyRef = from.secretKeyRef ?? from.configMapKeyRef;
    if (keyRef) {
      const kind = from.secretKeyRef ? 'Secret' : 'ConfigMap';
      const data = await read(kind, keyRef.name!).catch(() => undefined);
      const value = data?.[keyRef.key];
      if (value === undefined) {
        if (keyRef.optional) continue;
        if (!data) return missing(kind, keyRef.name!);
        return {
          reason: 'CreateContainerConfigError',
          message: `couldn't find key ${keyRef.key} in ${kind} ${namespace}/${keyRef.name}`,
        };
      }
      env[variable.name] = value;
    } else if (from.fieldRef) {
      const path = from.fieldRef.fieldPath;
      const m = ctx.pod().metadata!;
      const fields: Record<string, string | undefined> = {
        'metadata.name': m.name,
        'metadata.namespace': m.namespace,
        'metadata.uid': m.uid,
        'spec.nodeName': ctx.node.name,
        'spec.serviceAccountName': ctx.pod().spec?.serviceAccountName,
        'status.podIP': ctx.address()?.ip,
        'status.hostIP': ctx.node.hostIp,
      };
      const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
      env[variable.name] = label
        ? ((label[1] === 'labels' ? m.labels : m.annotations)?.[label[2]!] ?? '')
        : (fields[path] ?? '');
    } else {
      env[variable.name] = '';
    }
  }
  return { env };
}
