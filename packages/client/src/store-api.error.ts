/**
 * The one error type of the client. Every failure (an HTTP error answered by the service, a service
 * that cannot be reached, an answer that is not the Store API's) is a StoreApiError whose `message`
 * is one line saying what went wrong and what to check.
 */
import type { Problem, ProblemCode } from './resource-types.ts';
import type { ResponseMetadata } from './response-metadata.ts';

/** Codes for failures the service did not answer with a problem+json body. */
export type ClientErrorCode =
  /** The service could not be reached (connection refused or reset, host not found, timeout). */
  | 'network_error'
  /** Something answered, but not like the Store Integration API (HTML, wrong content type, bad JSON). */
  | 'not_store_api'
  /** A 5xx without a problem+json body (a proxy or load balancer in front of the service failed). */
  | 'server_error'
  /** The request was aborted through the caller's AbortSignal. */
  | 'aborted'
  /** No answer within timeoutMs, or an export stalled for idleTimeoutMs. */
  | 'timeout'
  /** toArray() met more records than its cap. */
  | 'too_many_records';

/** Every `code` a StoreApiError can carry: the service's problem codes and the client's own. */
export type StoreApiErrorCode = ProblemCode | ClientErrorCode;

/** A failed call: `status` and `problem` (the problem+json body) when the service answered. */
export class StoreApiError extends Error {
  override readonly name = 'StoreApiError';
  /** HTTP status; undefined when the service did not answer (network_error, aborted). */
  readonly status: number | undefined;
  /** The problem's `code` (e.g. `unauthorized`, `invalid_parameter`, `rate_limited`), or a ClientErrorCode. */
  readonly code: StoreApiErrorCode;
  /** The problem+json body the service answered, when it did. */
  readonly problem: Problem | undefined;
  /** Method and URL of the request, without the token. */
  readonly request: string;
  /** X-Request-Id of the answer, to find the request in the service's logs. */
  readonly requestId: string | undefined;
  /**
   * The metadata of the answer that failed (status, request id, rate limit, Retry-After, headers);
   * undefined when the service did not answer (network_error, timeout, aborted).
   */
  readonly lastResponse: ResponseMetadata | undefined;

  constructor(
    message: string,
    init: {
      status?: number;
      code: StoreApiErrorCode;
      problem?: Problem;
      request: string;
      requestId?: string;
      cause?: unknown;
      lastResponse?: ResponseMetadata;
    },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.problem = init.problem;
    this.request = init.request;
    this.requestId = init.requestId ?? init.lastResponse?.requestId;
    this.lastResponse = init.lastResponse;
  }

  /** The parameter errors of a 400 (`errors` of the problem), empty otherwise. */
  get errors(): { param: string; message: string }[] {
    return this.problem?.errors ?? [];
  }
}
