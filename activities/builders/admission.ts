import type { V1ConfigMap, V1Container, V1Volume } from '@kubernetes/client-node';
import type { ServedModel, Slot } from '../../workflows/contract/index.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { admissionConfigMapName, slotBase } from './names.js';
import { containerSecurityContext } from './pod.js';

// Admission (docs/design/baseline.md, section 5): an nginx sidecar in each engine pod, in front of the engine's port,
// answers 429 with Retry-After above the replica's measured concurrency instead of letting vLLM's queue grow. Its
// configuration lives in a ConfigMap that Ferry rewrites when the baseline changes; the sidecar reloads nginx when
// the mounted file changes, so a new limit needs no rollout (nothing here depends on the limit but the ConfigMap).

/**
 * The official unprivileged nginx build (uid 101, no root needed to listen, SIGQUIT as its stop signal), pinned to
 * an exact release of the stable branch (1.30; not pulled here, where no container runs: the configuration is
 * checked with Debian's nginx 1.22). Alpine, for its busybox sh and md5sum, which the reload loop below needs. A tag,
 * not a digest, like the engine's default image.
 */
const ADMISSION_IMAGE = 'nginxinc/nginx-unprivileged:1.30.5-alpine';
/** The sidecar's container name, whether it limits (admission) or only guards (the gate). */
export const ADMISSION_CONTAINER = 'admission';
/** The image's nginx user; the pod's default user (vLLM's uid 2000) has no business in this image. */
const NGINX_UID = 101;
/** The Service's targetPort (deployment.ts' HTTP_PORT_NAME): clients reach the engine through admission. */
const PORT_NAME = 'http';
const PREFERRED_PORT = 8080;
const VOLUME_NAME = 'admission-config';
const CONFIG_DIR = '/etc/ferry/admission';
const CONFIG_FILE = 'nginx.conf';
/** Writable: nginx's pid file and temporary directories (the configuration names them relative to this prefix). */
const NGINX_PREFIX = '/tmp/nginx/';
/**
 * What a rejected client is told to wait. A slot frees whenever any admitted request ends, and turning one away costs
 * nginx next to nothing (the engine never sees it), so clients may come back soon; OpenAI's SDKs honour it.
 */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;
/** The zone holding the one counter; its name and size stay fixed, so a reload keeps counting what is in flight. */
const ZONE = 'ferry_admission';
/** Requests that are not generation and cost the engine next to nothing: never limited. */
const UNLIMITED_PATHS = [
  '/health',
  '/ping',
  '/metrics',
  '/version',
  '/v1/models',
  '/tokenize',
  '/detokenize',
  '/v1/load_lora_adapter',
  '/v1/unload_lora_adapter',
];

/**
 * What the gate (FERRY_NETWORK_POLICY=on, docs/design/network-policy.md) serves clients: vLLM's inference routes, read
 * from vLLM 0.32's route table (test/real-engine/conformance.test.ts fails on a route of a new release that is in
 * neither list). Everything else is refused with 403: it is the worker's, on vLLM's own port.
 */
const CLIENT_ROUTES = {
  /** Health, metadata and tokenizing, cheap for the engine: never limited. */
  exact: [
    '/health',
    '/ping',
    '/ready',
    '/readyz',
    '/metrics',
    '/version',
    '/load',
    '/v1/models',
    '/tokenize',
    '/detokenize',
    '/tokenizer_info',
  ],
  /** Generation, pooling and their renderings: a path equal to one of these, or below it; limited with admission. */
  prefixes: [
    '/v1/chat/completions',
    '/v1/completions',
    '/v1/responses',
    '/v1/messages',
    '/v1/embeddings',
    '/v1/audio',
    '/v1/realtime',
    '/v1/rerank',
    '/v1/score',
    '/v1/systemone',
    '/v2/embed',
    '/v2/rerank',
    '/cohere/v2/chat',
    '/rerank',
    '/score',
    '/classify',
    '/pooling',
    '/invocations',
    '/inference/v1/generate',
    '/generative_scoring',
  ],
} as const;

/** Whether the gate passes `path` on to the engine (the same rule as the nginx locations it writes). */
export function isClientRoute(path: string): boolean {
  return (
    (CLIENT_ROUTES.exact as readonly string[]).includes(path) ||
    CLIENT_ROUTES.prefixes.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))
  );
}

/**
 * Starts nginx in the foreground and reloads it when its configuration file changes; exits when nginx does, so the
 * kubelet restarts the container. POSIX sh only (the image has busybox's). `$1`: the configuration file, `$2`:
 * nginx's prefix. The kubelet updates a ConfigMap volume by swapping a symlink, so the file changes all at once.
 */
const RELOAD_SCRIPT = `set -u
conf=$1
prefix=$2
mkdir -p "$prefix" || exit 1
# Started directly, not through a shell function, so that $! is nginx's own pid (a function would run in a subshell).
nginx -p "$prefix" -c "$conf" -e stderr -g 'daemon off;' &
nginx_pid=$!
stopping=0
# The kubelet stops the container with SIGTERM to this shell (PID 1, which ignores signals it does not trap): pass it
# on as SIGQUIT, nginx's graceful stop, which lets requests in flight finish within the pod's grace period.
trap 'stopping=1; kill -QUIT "$nginx_pid" 2>/dev/null' TERM INT
sum=$(md5sum "$conf")
while kill -0 "$nginx_pid" 2>/dev/null; do
  # Every 2 s; wait, unlike a bare sleep, returns as soon as a signal arrives.
  sleep 2 &
  wait $!
  [ "$stopping" = 0 ] || continue
  now=$(md5sum "$conf" 2>/dev/null) || continue
  [ "$now" != "$sum" ] || continue
  sum=$now
  echo "ferry-admission: $conf changed: reloading nginx" >&2
  # nginx -s reload checks the file first: one it refuses leaves the running configuration in place.
  nginx -p "$prefix" -c "$conf" -e stderr -s reload || echo "ferry-admission: nginx refused $conf; it runs on as it was" >&2
done
wait "$nginx_pid"
`;

export interface AdmissionConfigOptions {
  /** Where nginx listens: the pod's admission port, or a free port beside a local engine stand-in. */
  listenPort: number;
  /** The address it listens on; all interfaces when unset (in a pod), 127.0.0.1 in the local stack. */
  listenAddress?: string;
  /** The engine's port on 127.0.0.1 (the same pod, or the same machine). */
  enginePort: number;
  /** Generation requests in flight at most; 0 (no concurrency meets the goal) or undefined (not measured): no limit. */
  maxConcurrency: number | undefined;
  retryAfterSeconds: number;
  /** The gate: clients get CLIENT_ROUTES only, everything else 403 (FERRY_NETWORK_POLICY=on). */
  clientRoutesOnly?: boolean;
  /** The model has no admission: the sidecar is the gate alone, and never limits. */
  gateOnly?: boolean;
}

/** Whether the model's replicas turn away what is above their measured concurrency: `spec.slo.admission`. */
export function hasAdmission(model: ServedModel): boolean {
  return model.spec.slo?.admission === true;
}

/**
 * Whether the engine pods have the nginx sidecar: for admission, or as the gate that keeps clients off vLLM's admin
 * routes when the worker runs with a NetworkPolicy per model (`options.networkPolicy`).
 */
export function hasSidecar(model: ServedModel, options: Pick<ChildOptions, 'networkPolicy'>): boolean {
  return hasAdmission(model) || options.networkPolicy !== undefined;
}

/** The sidecar's port: 8080, unless the engine has it, then 8081 (the containers share the pod's network). */
export function admissionPort(model: ServedModel): number {
  return model.spec.engine.port === PREFERRED_PORT ? PREFERRED_PORT + 1 : PREFERRED_PORT;
}

function wholeNumber(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`admission: ${name} must be a whole number from ${min} to ${max}, not ${value}`);
  }
  return value;
}

/**
 * The complete nginx.conf: no include of system files, and nothing that needs root (no `user`; the pid file and the
 * temporary directories relative to the prefix given with `-p`; errors to stderr, no access log), so it runs alike
 * with Debian's nginx (1.22) in the local stack and with the sidecar's image. Above the limit, generation requests
 * get 429 with Retry-After and a vLLM-style JSON error; the routes of UNLIMITED_PATHS are never limited.
 */
export function admissionConfig(options: AdmissionConfigOptions): string {
  const listenPort = wholeNumber('listenPort', options.listenPort, 1, 65_535);
  const enginePort = wholeNumber('enginePort', options.enginePort, 1, 65_535);
  const retryAfter = wholeNumber('retryAfterSeconds', options.retryAfterSeconds, 1, 86_400);
  const limit =
    options.maxConcurrency === undefined ? 0 : wholeNumber('maxConcurrency', options.maxConcurrency, 0, 1_000_000);
  const address = options.listenAddress;
  if (address !== undefined && !/^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\])$/.test(address)) {
    throw new RangeError(`admission: listenAddress must be an IPv4 address or a bracketed IPv6 one, not ${address}`);
  }
  const listen = address !== undefined ? `${address}:${listenPort}` : String(listenPort);
  // Each admitted request holds two connections (client and engine); room for as many again being turned away.
  const connections = limit > 0 ? Math.max(1024, 4 * limit) : 4096;
  const plural = limit === 1 ? 'request' : 'requests';
  const message =
    `This replica is at its measured capacity of ${limit} concurrent ${plural}. ` +
    `Retry after ${retryAfter} ${retryAfter === 1 ? 'second' : 'seconds'}.`;
  const body = JSON.stringify({ error: { message, type: 'TooManyRequests', param: null, code: 429 } });
  const summary =
    limit > 0
      ? [
          `# Limit: at most ${limit} generation ${plural} in flight on this replica (its measured concurrency); more are`,
          `# answered 429 with Retry-After: ${retryAfter}.`,
        ]
      : options.gateOnly
        ? ['# No limit: the model has no admission (spec.slo.admission); this proxy is its gate alone.']
        : options.maxConcurrency === undefined
          ? ['# No limit: no concurrency has been measured (yet).']
          : [
              '# No limit: the latency goal is not met even one request at a time, so a limit would only turn',
              '# requests away.',
            ];
  const gate = options.clientRoutesOnly === true;
  const unlimited = (gate ? CLIENT_ROUTES.exact : UNLIMITED_PATHS).map(
    (path) => `    location = ${path} { proxy_pass http://engine; }`,
  );
  const limited = [
    ...(limit > 0
      ? [
          `      limit_conn ${ZONE} ${limit};`,
          '      limit_conn_status 429;',
          '      limit_conn_log_level warn;',
          '      error_page 429 = @too_many_requests;',
        ]
      : []),
    '      proxy_pass http://engine;',
  ];
  const refusal = JSON.stringify({
    error: {
      // No apostrophe: nginx takes the body in single quotes.
      message: 'This route is not served to clients: the gate in front of this engine passes on inference routes only.',
      type: 'Forbidden',
      param: null,
      code: 403,
    },
  });
  const generation = gate
    ? [
        limit > 0 ? `    # Generation: at most ${limit} at a time.` : '    # Generation.',
        `    location ~ ^(?:${CLIENT_ROUTES.prefixes.join('|')})(?:/|$) {`,
        ...limited,
        '    }',
        '',
        "    # Everything else is the worker's, on the engine's own port: adapter loads, scaling, profiling, development.",
        '    location / {',
        `      return 403 '${refusal}';`,
        '    }',
      ]
    : [
        limit > 0
          ? `    # Generation (everything else): at most ${limit} at a time.`
          : '    # Generation (everything else).',
        '    location / {',
        ...limited,
        '    }',
      ];
  const lines = [
    "# Ferry's admission proxy for one engine replica. Generated by Ferry: do not edit; Ferry rewrites it when the",
    "# model's measured baseline changes, and the sidecar reloads nginx.",
    ...summary,
    ...(gate ? ["# Gate: clients get the inference routes only; the rest is the worker's, on the engine's port."] : []),
    '',
    'worker_processes 1;',
    `worker_rlimit_nofile ${2 * connections};`,
    'pid nginx.pid;',
    'error_log stderr warn;',
    '',
    'events {',
    `  worker_connections ${connections};`,
    '}',
    '',
    'http {',
    '  access_log off;',
    '  server_tokens off;',
    '  client_body_temp_path client_body_temp;',
    '  proxy_temp_path proxy_temp;',
    '  fastcgi_temp_path fastcgi_temp;',
    '  uwsgi_temp_path uwsgi_temp;',
    '  scgi_temp_path scgi_temp;',
    '',
    ...(limit > 0
      ? [
          '  # One counter for the whole server: every request counts, whoever sends it.',
          `  limit_conn_zone $server_name zone=${ZONE}:1m;`,
          '',
        ]
      : []),
    '  upstream engine {',
    // max_fails=0: a refused connection (the engine restarting) must not take the only server out of rotation.
    `    server 127.0.0.1:${enginePort} max_fails=0;`,
    '    keepalive 64;',
    // Below the engine's own idle timeout (uvicorn's 5 s), so nginx never reuses a connection the engine is closing.
    '    keepalive_timeout 4s;',
    '  }',
    '',
    '  server {',
    `    listen ${listen};`,
    '    server_name ferry-admission;',
    '    default_type application/json;',
    '    client_max_body_size 64m;',
    '',
    '    # Streaming: answers go out token by token, prompts go in as they arrive; a long generation is not cut off.',
    '    proxy_http_version 1.1;',
    '    proxy_set_header Connection "";',
    '    proxy_set_header Host $host;',
    '    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    '    proxy_buffering off;',
    '    proxy_request_buffering off;',
    '    proxy_read_timeout 1h;',
    '    proxy_send_timeout 1h;',
    '',
    gate
      ? '    # Never limited: health, metrics, the version, the model list and tokenizing.'
      : '    # Never limited: health, metrics, the version, the model list, tokenizing and adapter management.',
    ...unlimited,
    '',
    ...generation,
    ...(limit > 0
      ? [
          '',
          '    location @too_many_requests {',
          `      add_header Retry-After ${retryAfter} always;`,
          `      return 429 '${body}';`,
          '    }',
        ]
      : []),
    '  }',
    '}',
    '',
  ];
  return lines.join('\n');
}

/**
 * `<model>-admission`: the sidecar's nginx.conf for `maxConcurrency` (undefined before the first measurement: no
 * limit; a model without admission has none, its sidecar is the gate) and, when measured, the limit itself. It must exist before the engine's pods start (they mount it), so it is
 * applied before the Deployment, and rewritten in place when the baseline changes.
 */
export function admissionConfigMap(
  model: ServedModel,
  maxConcurrency: number | undefined,
  options: ChildOptions,
): V1ConfigMap {
  // Without admission the sidecar is the gate alone: no limit, whatever was measured.
  const limit = hasAdmission(model) ? maxConcurrency : undefined;
  const config = admissionConfig({
    listenPort: admissionPort(model),
    enginePort: model.spec.engine.port,
    maxConcurrency: limit,
    retryAfterSeconds: ADMISSION_RETRY_AFTER_SECONDS,
    clientRoutesOnly: options.networkPolicy !== undefined,
    ...(hasAdmission(model) ? {} : { gateOnly: true }),
  });
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: objectMeta(model, 'admission', admissionConfigMapName(slotBase(model.metadata.name, options.slot)), {
      rootUid: options.rootUid,
    }),
    data: {
      [CONFIG_FILE]: config,
      ...(limit !== undefined ? { 'max-concurrency': String(limit) } : {}),
    },
  };
}

/** The pod volume the sidecar reads its configuration from: the ConfigMap above. */
export function admissionVolume(model: ServedModel, slot?: Slot): V1Volume {
  return { name: VOLUME_NAME, configMap: { name: admissionConfigMapName(slotBase(model.metadata.name, slot)) } };
}

/**
 * The sidecar: nginx on the port named `http` (which the Service targets), in front of the engine on 127.0.0.1.
 * Needs admissionVolume in the pod. Independent of the limit, so a new limit changes the ConfigMap, not the pod.
 */
export function admissionContainer(model: ServedModel): V1Container {
  // Requests equal to limits, as the engine's, so the pod stays Guaranteed. CPU: a throttled proxy would stall
  // every token stream for the rest of a CFS period, so it has a few times what streaming needs.
  const amounts = { cpu: '250m', memory: '64Mi' };
  return {
    name: ADMISSION_CONTAINER,
    image: ADMISSION_IMAGE,
    command: ['/bin/sh', '-c', RELOAD_SCRIPT, 'ferry-admission', `${CONFIG_DIR}/${CONFIG_FILE}`, NGINX_PREFIX],
    ports: [{ name: PORT_NAME, containerPort: admissionPort(model), protocol: 'TCP' }],
    resources: { requests: amounts, limits: { ...amounts } },
    readinessProbe: { tcpSocket: { port: PORT_NAME }, periodSeconds: 5, failureThreshold: 3, timeoutSeconds: 2 },
    securityContext: { ...containerSecurityContext(), runAsUser: NGINX_UID, runAsNonRoot: true },
    volumeMounts: [{ name: VOLUME_NAME, mountPath: CONFIG_DIR, readOnly: true }],
  };
}
