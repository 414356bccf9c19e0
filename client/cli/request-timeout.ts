// `--request-timeout`: a bound on each single request to Temporal (connect, start, update, query, list), as
// kubectl's bounds each request to the API server. A gRPC interceptor gives every call a deadline (the earlier of
// its own and this one) and notes the calls that ran out of it, so that the command can name the request.
// Waits are not requests: the long polls that follow an update or a workflow's end, and what runs inside
// `withoutRequestTimeout` (`--wait`, `ferry watch`), are bounded by `--timeout` instead.
import { AsyncLocalStorage } from 'node:async_hooks';
import { type ConnectionOptions, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { formatDuration } from '../../workflows/contract/format.js';

type Interceptor = NonNullable<ConnectionOptions['interceptors']>[number];
/** gRPC's call, as an interceptor returns it (`@grpc/grpc-js` is the SDK's, not a dependency of Ferry's). */
type Call = ReturnType<Interceptor>;

/** Calls that wait for something to happen, by design as long as it takes. */
const LONG_POLLS = new Set(['PollWorkflowExecutionUpdate', 'GetWorkflowExecutionHistory']);
/** gRPC's DEADLINE_EXCEEDED. */
const DEADLINE_EXCEEDED = 4;
/**
 * gRPC's CANCELLED. The server gives up on a call at the deadline it was sent with and resets the stream, which grpc-js
 * reports as CANCELLED ("Call cancelled") when that reaches it before its own deadline timer has fired: a call that
 * ends so at its deadline (within SAME_DEADLINE_MS) ran out of it too.
 */
const CANCELLED = 1;
const SAME_DEADLINE_MS = 100;

const waiting = new AsyncLocalStorage<true>();

/** Runs `wait` (a wait for a phase: its requests are long polls) without the bound on each request. */
export function withoutRequestTimeout<T>(wait: () => Promise<T>): Promise<T> {
  return waiting.run(true, wait);
}

/** A request to Temporal that took longer than `--request-timeout`. */
export class RequestTimeoutError extends Error {
  override readonly name = 'RequestTimeoutError';

  constructor(
    readonly request: string,
    readonly timeoutMs: number,
    address: string,
  ) {
    super(
      `Temporal at ${address} did not answer the ${request} request within ${formatDuration(timeoutMs)} ` +
        '(--request-timeout); try again, or give it longer',
    );
  }
}

export interface RequestBound {
  /** The connection's interceptors: the bound, then the SDK's own retries (which it has by default). */
  interceptors: Interceptor[];
  /** The first request that ran out of time, by its gRPC method (`QueryWorkflow`); undefined while none did. */
  timedOut: () => string | undefined;
}

/** Bounds each request to `timeoutMs`. */
export function boundRequests(timeoutMs: number): RequestBound {
  let first: string | undefined;
  const bound: Interceptor = (options, nextCall) => {
    const method = options.method_definition.path.split('/').pop() ?? options.method_definition.path;
    if (LONG_POLLS.has(method) || waiting.getStore()) return nextCall(options) as Call;
    const deadline = Date.now() + timeoutMs;
    // A deadline of the call's own that comes first stays, and so does the error it ends with.
    if (options.deadline !== undefined && new Date(options.deadline).getTime() <= deadline) {
      return nextCall(options) as Call;
    }
    const call = nextCall({ ...options, deadline }) as Call;
    const start = call.start.bind(call);
    call.start = (metadata, listener) =>
      start(metadata, {
        onReceiveMetadata: (received) => listener?.onReceiveMetadata?.(received),
        onReceiveMessage: (message) => listener?.onReceiveMessage?.(message),
        onReceiveStatus: (status) => {
          const code = Number(status.code);
          if (code === DEADLINE_EXCEEDED || (code === CANCELLED && Date.now() >= deadline - SAME_DEADLINE_MS))
            first ??= method;
          listener?.onReceiveStatus?.(status);
        },
      });
    return call;
  };
  return {
    interceptors: [bound, makeGrpcRetryInterceptor(defaultGrpcRetryOptions())],
    timedOut: () => first,
  };
}
