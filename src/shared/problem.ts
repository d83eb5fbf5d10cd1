/**
 * The one registry of error codes (RFC 9457 problem+json). Every error response is built here;
 * 5xx bodies never carry internal detail (stack, SQL).
 */
export const errorCodes = {
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  store_suspended: { status: 403, title: 'Store Suspended' },
  second_factor_required: { status: 401, title: 'Second Factor Required' },
  invalid_second_factor: { status: 401, title: 'Invalid Second Factor' },
  second_factor_enrolment_required: { status: 403, title: 'Second Factor Enrolment Required' },
  reauthentication_required: { status: 403, title: 'Reauthentication Required' },
  not_found: { status: 404, title: 'Not Found' },
  invalid_parameter: { status: 400, title: 'Invalid Parameter' },
  invalid_body: { status: 400, title: 'Invalid Request Body' },
  malformed_request: { status: 400, title: 'Malformed Request' },
  method_not_allowed: { status: 405, title: 'Method Not Allowed' },
  request_timeout: { status: 408, title: 'Request Timeout' },
  payload_too_large: { status: 413, title: 'Payload Too Large' },
  uri_too_long: { status: 414, title: 'URI Too Long' },
  unsupported_media_type: { status: 415, title: 'Unsupported Media Type' },
  conflict: { status: 409, title: 'Conflict' },
  store_limit_reached: { status: 409, title: 'Store Limit Reached' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency Key In Use' },
  idempotency_key_reused: { status: 422, title: 'Idempotency Key Reused' },
  rate_limited: { status: 429, title: 'Too Many Requests' },
  header_fields_too_large: { status: 431, title: 'Request Header Fields Too Large' },
  internal_error: { status: 500, title: 'Internal Server Error' },
  service_unavailable: { status: 503, title: 'Service Unavailable' },
  insufficient_storage: { status: 507, title: 'Insufficient Storage' },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export interface ParamError {
  param: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  errors?: ParamError[];
}

/** An error that becomes a problem+json response with its code's status. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly errors?: ParamError[],
    readonly headers?: Record<string, string>,
  ) {
    super(detail);
    this.name = 'ApiError';
  }

  get status(): number {
    return errorCodes[this.code].status;
  }
}

/** Builds the problem body of `code`. */
export function problemBody(code: ErrorCode, detail: string, errors?: ParamError[]): Problem {
  const { status, title } = errorCodes[code];
  return {
    type: `https://store-api.dev/problems/${code.replace(/_/g, '-')}`,
    title,
    status,
    detail,
    code,
    ...(errors && errors.length > 0 ? { errors } : {}),
  };
}

/** Shorthand for the most common client error: one bad parameter. */
export function invalidParameter(param: string, message: string): ApiError {
  return new ApiError('invalid_parameter', `Invalid value for '${param}': ${message}`, [{ param, message }]);
}

export function notFound(what: string, id: string): ApiError {
  return new ApiError('not_found', `No ${what} with id '${id}'.`);
}

export function conflict(detail: string): ApiError {
  return new ApiError('conflict', detail);
}
