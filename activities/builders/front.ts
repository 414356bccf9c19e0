// The front of a model with spec.front (docs/design/scaling.md, section 6): HAProxy in front of the engine's Service,
// which holds each request while no replica answers — it tries the connection again about once a second for
// `holdSeconds` — and passes it on as soon as one does; past its bound or its hold it answers 503 with Retry-After,
// never a reset connection. With several revisions (docs/design/rollout.md), one server each, sharing the requests by
// weight, and every response names the revision that answered. Pure: the configuration file's text. Checked against
// a real HAProxy in test/integration/front/hold.test.ts and split.test.ts; its Kubernetes objects are
// front-objects.ts'.

export interface FrontOptions {
  /** Where the front listens: `:8000` in a pod, `127.0.0.1:<port>` in a test. */
  bind: string;
  /**
   * The revisions requests go to: each its engine's Service (`<host>:<port>`) and its share, a weight out of the
   * weights' sum (a weight of 0: no requests). The server is named after the revision, which every response names.
   */
  servers: readonly FrontServer[];
  /** How long a request is held while no replica answers, in seconds (one connection attempt about each second). */
  holdSeconds: number;
  /** Requests passed to each revision at once; while none answers, these are the ones held. */
  maxConnections: number;
  /** Requests that wait beyond those; more are answered 503 at once. */
  maxQueued: number;
  /** What Retry-After says when a request is turned away, in seconds. */
  retryAfterSeconds: number;
  /** Where HAProxy's Prometheus exporter answers GET /metrics (activities/scaling/load.ts `frontLoad` reads it). */
  metricsBind?: string;
  /** With `metricsBind`: a path there that answers 200 while HAProxy runs (the kubelet's probe), whatever the engine. */
  readyPath?: string;
}

/** One revision behind the front (docs/design/rollout.md, section 3). */
interface FrontServer {
  /** The revision, `r<n>`: the server's name and what `x-ferry-revision` says. */
  revision: string;
  /** Its engine's Service, `<host>:<port>`. */
  address: string;
  /** Its share: whole percent, 0 to 100. */
  weight: number;
}

/** The response header that names the revision that answered. */
export const REVISION_HEADER = 'x-ferry-revision';

export const FRONT_DEFAULTS = {
  holdSeconds: 600,
  maxConnections: 1024,
  maxQueued: 256,
  retryAfterSeconds: 30,
} as const satisfies Partial<FrontOptions>;

/** An OpenAI-style error body for a 503, quoted for HAProxy's `string` argument (no quote or backslash inside). */
const unavailable = (message: string) =>
  `'${JSON.stringify({ error: { message, type: 'service_unavailable', code: 503 } })}'`;

/** The front's haproxy.cfg. */
export function frontConfig(options: FrontOptions): string {
  const { bind, servers, holdSeconds, maxConnections, maxQueued, retryAfterSeconds, metricsBind, readyPath } = options;
  for (const [name, value] of Object.entries({ holdSeconds, maxConnections, maxQueued, retryAfterSeconds })) {
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`front: ${name} must be a whole number above 0`);
  }
  const address = /^[A-Za-z0-9.:[\]-]*:\d+$/;
  if (!address.test(bind) || !address.test(metricsBind ?? ':1')) {
    throw new Error(`front: bind and metricsBind must be <host>:<port>, got ${JSON.stringify({ bind, metricsBind })}`);
  }
  checkServers(servers, address);
  if (readyPath !== undefined && (!metricsBind || !/^\/[A-Za-z0-9/_-]*$/.test(readyPath))) {
    throw new Error(`front: readyPath must be a plain path and needs metricsBind, got ${JSON.stringify(readyPath)}`);
  }
  const retryAfter = `hdr Retry-After ${retryAfterSeconds}`;
  return [
    '# Written by Ferry: the front of one model (docs/design/scaling.md, section 6).',
    'global',
    `  maxconn ${maxConnections + maxQueued + 64}`,
    'defaults',
    '  mode http',
    // A completion may run for many minutes without a byte (not streamed), or pause between streamed ones.
    '  timeout client 1h',
    '  timeout server 1h',
    '  timeout http-request 30s',
    // One connection attempt a second while no replica answers (HAProxy waits min(connect, 1 s) between them).
    '  timeout connect 1s',
    `  timeout queue ${holdSeconds}s`,
    'frontend model',
    `  bind ${bind}`,
    `  http-request return status 503 content-type application/json ${retryAfter} string ${unavailable('too many requests are waiting for this model; try again later')} if { queue(engine) ge ${maxQueued} }`,
    '  default_backend engine',
    ...(metricsBind
      ? [
          'frontend metrics',
          `  bind ${metricsBind}`,
          ...(readyPath ? [`  monitor-uri ${readyPath}`] : []),
          '  http-request use-service prometheus-exporter if { path /metrics }',
        ]
      : []),
    'backend engine',
    // Each revision gets exactly its weight of every round of requests (HAProxy's weighted round robin).
    '  balance roundrobin',
    // Refused (no replica: kube-proxy rejects) or closed before an answer (a proxy with no endpoint): try again; with
    // several revisions on another one, so that a revision going away costs a client a retry, not its request. (Not
    // with one: a request redispatched leaves its server's slot, and the bound would no longer hold the others.)
    `  retries ${holdSeconds}`,
    '  retry-on conn-failure empty-response',
    ...(servers.filter((s) => s.weight > 0).length > 1 ? ['  option redispatch 1'] : []),
    `  http-error status 503 content-type application/json ${retryAfter} string ${unavailable('the model did not answer in time; try again later')}`,
    `  http-response set-header ${REVISION_HEADER} %[srv_name]`,
    ...servers
      .filter((s) => s.weight > 0)
      .map((s) => `  server ${s.revision} ${s.address} weight ${s.weight} maxconn ${maxConnections}`),
    '',
  ].join('\n');
}

/** Revisions named `r<n>` once each, at addresses, with whole weights of at most 100 and one above 0. */
function checkServers(servers: readonly FrontServer[], address: RegExp): void {
  const bad = servers.find(
    (s) =>
      !/^r[1-9]\d{0,8}$/.test(s.revision) ||
      !address.test(s.address) ||
      !s.address.split(':')[0] ||
      !Number.isSafeInteger(s.weight) ||
      s.weight < 0 ||
      s.weight > 100,
  );
  if (bad) throw new Error(`front: a server must be r<n> at <host>:<port>, weight 0-100, got ${JSON.stringify(bad)}`);
  if (new Set(servers.map((s) => s.revision)).size !== servers.length) {
    throw new Error(`front: each revision once, got ${servers.map((s) => s.revision).join(', ')}`);
  }
  if (!servers.some((s) => s.weight > 0)) throw new Error('front: at least one server with a weight above 0');
}
