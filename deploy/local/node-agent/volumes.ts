// A pod's volumes as host directories, the way a kubelet and a simple CSI driver would set them up:
// - persistentVolumeClaim: one directory per PersistentVolume, so what the puller writes is what the engine reads, and a
//   retained claim keeps its files; a ReadWriteOnce volume is attached to one node at a time (a pod on another node
//   waits, with the attach/detach controller's Multi-Attach event);
// - emptyDir: a directory of the pod's, or memory (tmpfs, with its sizeLimit) for medium Memory;
// - configMap and secret: the keys as files, swapped in atomically through a `..data` link as the kubelet does, and
//   refreshed while the pod runs (the admission sidecar reloads nginx when its file changes).
import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { CoreV1Api, V1Pod, V1Volume } from '@kubernetes/client-node';
import { parseQuantity } from '../../../workflows/contract/spec/quantities.js';

const run = promisify(execFile);

/** Why a pod cannot start yet: an event to post and, for the attach controller's, who posts it. */
interface VolumeProblem {
  reason: string;
  message: string;
  component: string;
}

/** ReadWriteOnce volumes: which node each is attached to, and by which pods. */
export class Attachments {
  private readonly byVolume = new Map<string, { node: string; pods: Map<string, string> }>();

  /** Attaches `volume` to `node` for the pod; the names of the pods holding it on another node when it cannot. */
  attach(volume: string, node: string, podUid: string, podName: string): string[] | undefined {
    const held = this.byVolume.get(volume);
    if (held && held.node !== node && held.pods.size > 0) return [...held.pods.values()];
    const entry = held && held.node === node ? held : { node, pods: new Map<string, string>() };
    entry.pods.set(podUid, podName);
    this.byVolume.set(volume, entry);
    return undefined;
  }

  detach(podUid: string): void {
    for (const [volume, entry] of this.byVolume) {
      entry.pods.delete(podUid);
      if (entry.pods.size === 0) this.byVolume.delete(volume);
    }
  }
}

export interface VolumeContext {
  core: CoreV1Api;
  pod: V1Pod;
  node: string;
  /** Where persistent volumes live: `<dir>/<pv name>`. */
  volumesDir: string;
  /** The pod's own directory (emptyDir, configMap and secret volumes). */
  podDir: string;
  attachments: Attachments;
}

type Prepared = { paths: Map<string, string> } | { problem: VolumeProblem };

const modeOf = (mode: number | undefined, fallback: number) => mode ?? fallback;

/** Writes `files` (relative path → content) into `dir` as the kubelet's atomic writer does; true when it changed. */
export function projectFiles(dir: string, files: Map<string, { content: Buffer; mode: number }>): boolean {
  mkdirSync(dir, { recursive: true });
  const current = join(dir, '..data');
  const same =
    existsSync(current) &&
    [...files].every(([path, f]) => {
      try {
        return readFileSync(join(current, path)).equals(f.content);
      } catch {
        return false;
      }
    });
  if (same) return false;
  const stamp = `..${new Date().toISOString().replace(/[-:.]/g, '_')}.${process.hrtime.bigint()}`;
  const next = join(dir, stamp);
  for (const [path, f] of files) {
    mkdirSync(dirname(join(next, path)), { recursive: true });
    writeFileSync(join(next, path), f.content, { mode: f.mode });
    chmodSync(join(next, path), f.mode);
  }
  const tmpLink = join(dir, '..data_tmp');
  rmSync(tmpLink, { force: true });
  symlinkSync(stamp, tmpLink);
  renameSync(tmpLink, current);
  for (const path of files.keys()) {
    const top = path.split('/')[0]!;
    if (!existsSync(join(dir, top))) symlinkSync(join('..data', top), join(dir, top));
  }
  return true;
}

async function configFiles(
  ctx: VolumeContext,
  volume: V1Volume,
): Promise<Map<string, { content: Buffer; mode: number }> | VolumeProblem> {
  const namespace = ctx.pod.metadata!.namespace!;
  const source = volume.configMap ?? volume.secret!;
  const kind = volume.configMap ? 'configmap' : 'secret';
  const name = volume.configMap ? volume.configMap.name! : volume.secret!.secretName!;
  let data: Record<string, Buffer>;
  try {
    if (volume.configMap) {
      const cm = await ctx.core.readNamespacedConfigMap({ name, namespace });
      data = Object.fromEntries([
        ...Object.entries(cm.data ?? {}).map(([k, v]): [string, Buffer] => [k, Buffer.from(v, 'utf8')]),
        ...Object.entries(cm.binaryData ?? {}).map(([k, v]): [string, Buffer] => [k, Buffer.from(v, 'base64')]),
      ]);
    } else {
      const secret = await ctx.core.readNamespacedSecret({ name, namespace });
      data = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]): [string, Buffer] => [k, Buffer.from(v, 'base64')]),
      );
    }
  } catch (err) {
    if ((err as { code?: number }).code === 404 && source.optional) data = {};
    else {
      return {
        reason: 'FailedMount',
        message: `MountVolume.SetUp failed for volume "${volume.name}" : ${kind} "${name}" not found`,
        component: 'kubelet',
      };
    }
  }
  const defaultMode = modeOf(source.defaultMode, 0o644);
  const files = new Map<string, { content: Buffer; mode: number }>();
  if (source.items?.length) {
    for (const item of source.items) {
      const content = data[item.key];
      if (content === undefined) {
        if (source.optional) continue;
        return {
          reason: 'FailedMount',
          message: `MountVolume.SetUp failed for volume "${volume.name}" : configmap references non-existent config key: ${item.key}`,
          component: 'kubelet',
        };
      }
      files.set(item.path, { content, mode: modeOf(item.mode, defaultMode) });
    }
  } else {
    for (const [key, content] of Object.entries(data)) files.set(key, { content, mode: defaultMode });
  }
  return files;
}

/**
 * A projected volume's files: service account tokens (a TokenRequest bound to the pod), configMap and secret keys, and
 * the downward API's namespace and name: what the default `kube-api-access-*` volume and most others use.
 */
async function projectedFiles(
  ctx: VolumeContext,
  volume: V1Volume,
): Promise<Map<string, { content: Buffer; mode: number }> | VolumeProblem> {
  const pod = ctx.pod.metadata!;
  const defaultMode = modeOf(volume.projected!.defaultMode, 0o644);
  const files = new Map<string, { content: Buffer; mode: number }>();
  for (const source of volume.projected!.sources ?? []) {
    if (source.serviceAccountToken) {
      const sa = ctx.pod.spec?.serviceAccountName ?? 'default';
      try {
        const token = await ctx.core.createNamespacedServiceAccountToken({
          name: sa,
          namespace: pod.namespace!,
          body: {
            spec: {
              audiences: source.serviceAccountToken.audience ? [source.serviceAccountToken.audience] : [],
              expirationSeconds: source.serviceAccountToken.expirationSeconds ?? 3607,
              boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid },
            },
          },
        });
        files.set(source.serviceAccountToken.path, { content: Buffer.from(token.status!.token), mode: defaultMode });
      } catch (err) {
        return {
          reason: 'FailedMount',
          message: `MountVolume.SetUp failed for volume "${volume.name}" : failed to fetch token: ${String(err)}`,
          component: 'kubelet',
        };
      }
    } else if (source.configMap || source.secret) {
      const single = await configFiles(ctx, {
        name: volume.name,
        ...(source.configMap
          ? { configMap: { ...source.configMap, defaultMode } }
          : { secret: { ...source.secret, secretName: source.secret!.name, defaultMode } }),
      });
      if (!(single instanceof Map)) return single;
      for (const [path, file] of single) files.set(path, file);
    } else if (source.downwardAPI) {
      for (const item of source.downwardAPI.items ?? []) {
        const path = item.fieldRef?.fieldPath;
        const value =
          path === 'metadata.namespace'
            ? pod.namespace
            : path === 'metadata.name'
              ? pod.name
              : path === 'metadata.uid'
                ? pod.uid
                : '';
        files.set(item.path, { content: Buffer.from(value ?? ''), mode: modeOf(item.mode, defaultMode) });
      }
    }
  }
  return files;
}

/** The kubelet's fsGroup ownership change: every file the group's and group-writable, directories setgid. */
function applyFsGroup(dir: string, gid: number): void {
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) return;
  chownSync(dir, st.uid, gid);
  if (st.isDirectory()) {
    chmodSync(dir, (st.mode & 0o7777) | 0o2070);
    for (const name of readdirSync(dir)) applyFsGroup(join(dir, name), gid);
  } else {
    chmodSync(dir, (st.mode & 0o7777) | 0o060);
  }
}

/** Sets up every volume of the pod; a problem (and nothing half-made for that volume) when one cannot be yet. */
export async function prepareVolumes(ctx: VolumeContext): Promise<Prepared> {
  const paths = new Map<string, string>();
  const pod = ctx.pod;
  const fsGroup = pod.spec?.securityContext?.fsGroup;
  for (const volume of pod.spec?.volumes ?? []) {
    if (volume.persistentVolumeClaim) {
      const claimName = volume.persistentVolumeClaim.claimName;
      const claim = await ctx.core
        .readNamespacedPersistentVolumeClaim({ name: claimName, namespace: pod.metadata!.namespace! })
        .catch(() => undefined);
      if (!claim) {
        return {
          problem: {
            reason: 'FailedMount',
            message: `Unable to attach or mount volumes: persistentvolumeclaim "${claimName}" not found`,
            component: 'kubelet',
          },
        };
      }
      const pv = claim.spec?.volumeName;
      if (claim.status?.phase !== 'Bound' || !pv) {
        return {
          problem: {
            reason: 'FailedMount',
            message: `Unable to attach or mount volumes: persistentvolumeclaim "${claimName}" is not bound`,
            component: 'kubelet',
          },
        };
      }
      const modes = claim.spec?.accessModes ?? [];
      if (modes.includes('ReadWriteOnce') || modes.includes('ReadWriteOncePod')) {
        const holders = ctx.attachments.attach(pv, ctx.node, pod.metadata!.uid!, pod.metadata!.name!);
        if (holders) {
          return {
            problem: {
              reason: 'FailedAttachVolume',
              message: `Multi-Attach error for volume "${pv}" Volume is already used by pod(s) ${holders.join(', ')}`,
              component: 'attachdetach-controller',
            },
          };
        }
      }
      const dir = join(ctx.volumesDir, pv);
      if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o755 });
      // fsGroup: the volume is made the group's, group-writable, its directories setgid, so files written by one pod's
      // user stay the group's (the puller writes, the engine reads). With fsGroupChangePolicy OnRootMismatch (Ferry's)
      // only when the root does not already look so; Always (the default) every time.
      if (fsGroup !== undefined) {
        const root = statSync(dir);
        const policy = pod.spec?.securityContext?.fsGroupChangePolicy ?? 'Always';
        if (policy === 'Always' || root.gid !== fsGroup || (root.mode & 0o2070) !== 0o2070) applyFsGroup(dir, fsGroup);
      }
      paths.set(volume.name, dir);
    } else if (volume.emptyDir) {
      const dir = join(ctx.podDir, 'volumes', volume.name);
      if (!existsSync(dir)) {
        mkdirSync(dir, { recursive: true });
        chmodSync(dir, 0o777);
        if (volume.emptyDir.medium === 'Memory') {
          const size = volume.emptyDir.sizeLimit ? parseQuantity(volume.emptyDir.sizeLimit) : undefined;
          await run('mount', ['-t', 'tmpfs', '-o', `mode=1777${size ? `,size=${size}` : ''}`, 'ferry-emptydir', dir]);
        }
      }
      paths.set(volume.name, dir);
    } else if (volume.projected) {
      const files = await projectedFiles(ctx, volume);
      if (!(files instanceof Map)) return { problem: files };
      const dir = join(ctx.podDir, 'volumes', volume.name);
      projectFiles(dir, files);
      chmodSync(dir, 0o755);
      paths.set(volume.name, dir);
    } else if (volume.configMap || volume.secret) {
      const files = await configFiles(ctx, volume);
      if (!(files instanceof Map)) return { problem: files };
      const dir = join(ctx.podDir, 'volumes', volume.name);
      projectFiles(dir, files);
      chmodSync(dir, 0o755);
      paths.set(volume.name, dir);
    } else {
      const kind = Object.keys(volume).find((k) => k !== 'name') ?? 'unknown';
      return {
        problem: {
          reason: 'FailedMount',
          message: `MountVolume.SetUp failed for volume "${volume.name}" : volumes of kind ${kind} are not supported by the local node agent`,
          component: 'kubelet',
        },
      };
    }
  }
  return { paths };
}

/** Brings the pod's configMap and secret volumes up to date (the kubelet's periodic sync); names what changed. */
export async function refreshConfigVolumes(ctx: VolumeContext): Promise<string[]> {
  const changed: string[] = [];
  for (const volume of ctx.pod.spec?.volumes ?? []) {
    if (!volume.configMap && !volume.secret) continue;
    const files = await configFiles(ctx, volume);
    if (files instanceof Map && projectFiles(join(ctx.podDir, 'volumes', volume.name), files))
      changed.push(volume.name);
  }
  return changed;
}

/** Unmounts the pod's memory-backed emptyDirs (before its directory is deleted). */
export async function releaseVolumes(ctx: Pick<VolumeContext, 'pod' | 'podDir'>): Promise<void> {
  for (const volume of ctx.pod.spec?.volumes ?? []) {
    if (volume.emptyDir?.medium === 'Memory') {
      const dir = join(ctx.podDir, 'volumes', volume.name);
      await run('umount', ['-l', dir]).catch(() => undefined);
    }
  }
}
