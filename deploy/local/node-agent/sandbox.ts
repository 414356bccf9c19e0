// One container as a host process, set up the way a container runtime would: in its pod's network namespace, in a
// mount namespace of its own whose root is a directory made for this run (the container's writable layer) showing the
// host's /usr read-only, an /etc of its own (an overlay on the host's, with the image's users), a minimal /dev, a
// memory-backed /dev/shm, the image's runtime directories and the pod's volumes; in a memory and a CPU cgroup with the
// container's limits (so the kernel, not the agent, kills it with OOMKilled); as the user the pod's security context
// names, without capabilities and with no_new_privs. Its environment is handed over as the process environment, never
// written to a file or an argument.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';
const CGROUP_PARENT = 'ferry-node-agent';
const IP = existsSync('/usr/sbin/ip') ? '/usr/sbin/ip' : '/sbin/ip';

interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
}

export interface ContainerLaunch {
  /** Unique per pod and container, for cgroup names: `<pod uid>-<container>`. */
  id: string;
  /** A directory of this run's own: the root, the overlay's layers and the scripts live here. */
  dir: string;
  /** The pod's network namespace. */
  netns: string;
  argv: string[];
  env: Record<string, string>;
  workingDir: string;
  uid: number;
  gid: number;
  /** Supplementary groups (the pod's fsGroup). */
  groups: number[];
  noNewPrivs: boolean;
  /** The user's home, created in the writable layer and owned by the user when it does not exist in the image. */
  home: string;
  /** Full /etc/passwd and /etc/group contents for the image (its users first). */
  passwd: string;
  group: string;
  /** The pod's name (its UTS namespace's hostname). */
  hostname: string;
  /** /etc/hosts: the pod's name on its IP. */
  hosts: string;
  /** Directories bound at their own path, read-only (the image's runtime), then the pod's volumes. */
  runtimeBinds: string[];
  mounts: Mount[];
  /** /dev/shm's size when no volume mounts there (a runtime's default is 64 MiB). */
  shmBytes: number;
  memoryLimitBytes?: number;
  /** CPU limit in millicores: a CFS quota. */
  cpuLimitMillis?: number;
  /** Where the container's stdout and stderr go. */
  logFile: string;
  /** The host file bound at `terminationMessagePath` (the container writes its termination message there). */
  terminationFile: string;
  terminationMessagePath: string;
}

export interface ContainerExit {
  exitCode: number;
  /** The kernel's OOM killer killed a process of the container (its memory cgroup counted an oom_kill). */
  oomKilled: boolean;
  /** A process could not be started at all (the command is missing, say): not the container's own exit. */
  startError?: string;
}

/** Single-quoted for sh. */
export function shq(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function cgroupDir(controller: string, id: string): string {
  return join(CGROUP_ROOT, controller, CGROUP_PARENT, id);
}

/**
 * The first script: joins the container's cgroups (before `ip netns exec`, which mounts a /sys of the network
 * namespace's own, without the cgroup file systems), then enters the pod's network namespace and a mount namespace.
 */
function preludeScript(launch: ContainerLaunch, setup: string): string {
  const lines = ['set -eu'];
  for (const controller of ['memory', 'cpu']) {
    lines.push(`echo $$ > ${shq(join(cgroupDir(controller, launch.id), 'cgroup.procs'))}`);
  }
  lines.push(
    `exec ${IP} netns exec ${shq(launch.netns)} /usr/bin/unshare --mount --uts --propagation private /bin/sh ${shq(setup)}`,
  );
  return `${lines.join('\n')}\n`;
}

/** The script that runs as root in the new mount namespace, builds the root and ends in exec of the container. */
function setupScript(launch: ContainerLaunch): string {
  const root = join(launch.dir, 'rootfs');
  const r = (path: string) => shq(join(root, path));
  const lines: string[] = ['set -eu'];
  lines.push(
    // Nothing mounted here may reach the host's mount namespace.
    'mount --make-rprivate /',
    `hostname ${shq(launch.hostname)}`,
    `mkdir -p ${r('')} ${shq(join(launch.dir, 'etc-upper'))} ${shq(join(launch.dir, 'etc-work'))}`,
  );
  for (const dir of ['usr', 'etc', 'proc', 'dev', 'sys', 'tmp', 'var/tmp', 'run', 'root', 'home']) {
    lines.push(`mkdir -p ${r(dir)}`);
  }
  lines.push(
    `chmod 1777 ${r('tmp')} ${r('var/tmp')}`,
    `chmod 755 ${r('root')}`,
    // Debian keeps its programs and libraries under /usr; /bin, /lib… are links into it.
    `for d in bin sbin lib lib32 lib64 libx32; do if [ -L /$d ]; then ln -sfn "$(readlink /$d)" ${shq(root)}/$d; ` +
      `elif [ -d /$d ]; then mkdir -p ${shq(root)}/$d; mount --rbind /$d ${shq(root)}/$d; ` +
      `mount -o remount,bind,ro ${shq(root)}/$d; fi; done`,
    `mount --rbind /usr ${r('usr')}`,
    `mount -o remount,bind,ro ${r('usr')}`,
    `mount -t overlay ferry-etc -o ${shq(`lowerdir=/etc,upperdir=${join(launch.dir, 'etc-upper')},workdir=${join(launch.dir, 'etc-work')}`)} ${r('etc')}`,
    `cat > ${r('etc/passwd')} <<'FERRY_PASSWD'\n${launch.passwd}FERRY_PASSWD`,
    `cat > ${r('etc/group')} <<'FERRY_GROUP'\n${launch.group}FERRY_GROUP`,
    `cat > ${r('etc/hosts')} <<'FERRY_HOSTS'\n${launch.hosts}FERRY_HOSTS`,
    `mount -t proc proc ${r('proc')}`,
    `mount --rbind /sys ${r('sys')}`,
    `mount -o remount,bind,ro ${r('sys')}`,
    // A minimal /dev, as a runtime makes it: a few device nodes, the standard links, a private shm.
    `mount -t tmpfs -o mode=755,size=1m ferry-dev ${r('dev')}`,
    `for n in null zero full random urandom tty; do touch ${shq(root)}/dev/$n; mount --bind /dev/$n ${shq(root)}/dev/$n; done`,
    `ln -s /proc/self/fd ${r('dev/fd')}`,
    `ln -s /proc/self/fd/0 ${r('dev/stdin')}`,
    `ln -s /proc/self/fd/1 ${r('dev/stdout')}`,
    `ln -s /proc/self/fd/2 ${r('dev/stderr')}`,
    `mkdir -p ${r('dev/shm')} ${r('dev/pts')}`,
  );
  const shmMounted = launch.mounts.some((m) => m.target === '/dev/shm');
  if (!shmMounted) lines.push(`mount -t tmpfs -o mode=1777,size=${launch.shmBytes} ferry-shm ${r('dev/shm')}`);
  for (const dir of launch.runtimeBinds) {
    lines.push(`mkdir -p ${r(dir)}`, `mount --rbind ${shq(dir)} ${r(dir)}`, `mount -o remount,bind,ro ${r(dir)}`);
  }
  for (const m of launch.mounts) {
    lines.push(
      `if [ -d ${shq(m.source)} ]; then mkdir -p ${r(m.target)}; else mkdir -p "$(dirname ${r(m.target)})"; touch ${r(m.target)}; fi`,
      `mount --rbind ${shq(m.source)} ${r(m.target)}`,
    );
    if (m.readOnly) lines.push(`mount -o remount,bind,ro ${r(m.target)}`);
  }
  lines.push(
    `mkdir -p "$(dirname ${r(launch.terminationMessagePath)})"`,
    `touch ${r(launch.terminationMessagePath)}`,
    `mount --bind ${shq(launch.terminationFile)} ${r(launch.terminationMessagePath)}`,
    `if [ ! -e ${r(launch.home)} ]; then mkdir -p ${r(launch.home)}; chown ${launch.uid}:${launch.gid} ${r(launch.home)}; fi`,
  );
  const setpriv = [
    '/usr/bin/setpriv',
    `--reuid=${launch.uid}`,
    `--regid=${launch.gid}`,
    launch.groups.length > 0 ? `--groups=${launch.groups.join(',')}` : '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    ...(launch.noNewPrivs ? ['--no-new-privs'] : []),
    '--',
    '/usr/bin/env',
    '-C',
    launch.workingDir,
    '--',
    ...launch.argv,
  ];
  lines.push(`exec /usr/sbin/chroot ${shq(root)} ${setpriv.map(shq).join(' ')}`);
  return `${lines.join('\n')}\n`;
}

function writeCgroupFile(controller: string, id: string, file: string, value: string): void {
  writeFileSync(join(cgroupDir(controller, id), file), value);
}

function cgroupPids(id: string): number[] {
  const file = join(cgroupDir('memory', id), 'cgroup.procs');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

function oomKills(id: string): number {
  try {
    const text = readFileSync(join(cgroupDir('memory', id), 'memory.oom_control'), 'utf8');
    return Number(/^oom_kill (\d+)/m.exec(text)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

function createCgroups(launch: ContainerLaunch): void {
  for (const controller of ['memory', 'cpu']) {
    removeCgroup(controller, launch.id);
    mkdirSync(cgroupDir(controller, launch.id), { recursive: true });
  }
  if (launch.memoryLimitBytes !== undefined) {
    writeCgroupFile('memory', launch.id, 'memory.limit_in_bytes', String(launch.memoryLimitBytes));
  }
  if (launch.cpuLimitMillis !== undefined) {
    writeCgroupFile('cpu', launch.id, 'cpu.cfs_period_us', '100000');
    writeCgroupFile('cpu', launch.id, 'cpu.cfs_quota_us', String(Math.max(1000, launch.cpuLimitMillis * 100)));
  }
}

function removeCgroup(controller: string, id: string): void {
  try {
    // A cgroup is removed with rmdir, which fails while it has processes (the caller kills them first).
    rmdirSync(cgroupDir(controller, id));
  } catch {
    // gone already, or still busy: removeLeftoverCgroups tries again at the next start
  }
}

/** Kills every process of a container that is still there (its cgroup's), e.g. children its main process left. */
function killAll(id: string, signal: NodeJS.Signals = 'SIGKILL'): number {
  const pids = cgroupPids(id);
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
  return pids.length;
}

/** A running container: its main process, and how it ended. */
export class ContainerProcess {
  readonly exited: Promise<ContainerExit>;
  private readonly child: ChildProcess;

  constructor(private readonly launch: ContainerLaunch) {
    removeRunDir(launch.dir);
    mkdirSync(launch.dir, { recursive: true });
    if (!existsSync(launch.terminationFile)) writeFileSync(launch.terminationFile, '');
    createCgroups(launch);
    const setup = join(launch.dir, 'setup.sh');
    const prelude = join(launch.dir, 'prelude.sh');
    writeFileSync(setup, setupScript(launch), { mode: 0o700 });
    writeFileSync(prelude, preludeScript(launch, setup), { mode: 0o700 });
    const log = openSync(launch.logFile, 'a');
    this.child = spawn(
      '/bin/sh',
      [prelude],
      // The container's environment is the process environment from here on: sh, chroot, setpriv and env keep it.
      { env: launch.env, stdio: ['ignore', log, log], detached: true },
    );
    closeSync(log);
    this.exited = new Promise((resolve) => {
      let startError: string | undefined;
      this.child.on('error', (err) => (startError = String(err)));
      this.child.on('close', (code, signal) => {
        const signals: Record<string, number> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGSEGV: 11, SIGABRT: 6 };
        const exitCode = code ?? 128 + (signal ? (signals[signal] ?? 1) : 1);
        const oomKilled = oomKills(launch.id) > 0;
        // The runtime ends the whole container with its main process: children left behind go too.
        killAll(launch.id);
        resolve({ exitCode, oomKilled, ...(startError ? { startError } : {}) });
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Sends `signal` to the main process (SIGTERM: the stop signal). */
  signal(signal: NodeJS.Signals): void {
    try {
      if (this.child.pid) process.kill(this.child.pid, signal);
    } catch {
      // gone already
    }
  }

  /** Stops it as the kubelet does: SIGTERM, SIGKILL to every process after `graceMs`. */
  async stop(graceMs: number): Promise<ContainerExit> {
    this.signal('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        killAll(this.launch.id);
        this.signal('SIGKILL');
        resolve();
      }, graceMs);
    });
    await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    return this.exited;
  }

  /** Removes what the run left: its cgroups (empty once it has exited) and its root directory. */
  async cleanUp(keepDir = false): Promise<void> {
    await this.exited;
    for (let i = 0; i < 50 && cgroupPids(this.launch.id).length > 0; i++) {
      killAll(this.launch.id);
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const controller of ['memory', 'cpu']) removeCgroup(controller, this.launch.id);
    if (!keepDir) removeRunDir(this.launch.dir);
  }
}

/**
 * Deletes a run's directory, unless something is mounted below it in this mount namespace: the root's mounts live only
 * in the container's own namespace, and deleting through a bind mount of /usr would delete the host's files.
 */
export function removeRunDir(dir: string): void {
  const mounted = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`));
  if (mounted.length > 0) throw new Error(`not deleting ${dir}: ${mounted.join(', ')} mounted below it`);
  rmSync(dir, { recursive: true, force: true });
}

/** Removes the cgroups and processes a previous run of the agent left behind. */
export function removeLeftoverCgroups(): number {
  let killed = 0;
  for (const controller of ['memory', 'cpu']) {
    const parent = join(CGROUP_ROOT, controller, CGROUP_PARENT);
    if (!existsSync(parent)) continue;
    for (const id of readDirSafe(parent)) {
      if (controller === 'memory') killed += killAll(id);
      removeCgroup(controller, id);
    }
  }
  return killed;
}

function readDirSafe(dir: string): string[] {
  try {
    // Child cgroups are the directories; the controller's own files are not.
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}
