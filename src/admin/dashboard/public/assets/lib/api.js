/**
 * Calls to the service from the dashboard. Same-origin fetch with the session cookie; every
 * state-changing call carries the session's CSRF token in X-CSRF-Token (the server refuses it
 * otherwise). Errors arrive as RFC 9457 problem+json and are thrown as ApiProblem.
 */
export const ADMIN_API = '/admin/api/v1';

/** An error answer of the service, with its problem body. */
export class ApiProblem extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `Request failed with status ${status}`);
    this.name = 'ApiProblem';
    this.status = status;
    this.code = problem?.code;
    this.errors = problem?.errors ?? [];
  }
}

let csrfToken = null;
let sessionLostHandler = () => {};
let reauthenticationHandler = null;
let enrolmentRequiredHandler = () => {};

export function setCsrfToken(token) {
  csrfToken = token;
}

/** Called once with the problem when a request finds the session gone (401). */
export function onSessionLost(handler) {
  sessionLostHandler = handler;
}

/**
 * Called with the problem when a sensitive action needs a fresh proof (403 reauthentication_required);
 * resolves true once the proof was given, and the request is then retried once.
 */
export function onReauthenticationRequired(handler) {
  reauthenticationHandler = handler;
}

/** Called when the owner requires a second factor this administrator has not set up (403). */
export function onEnrolmentRequired(handler) {
  enrolmentRequiredHandler = handler;
}

/**
 * request('GET', '/tokens') → parsed JSON body (null for 204). Paths not starting with /admin are
 * relative to the admin API. With `contentType` the body is sent as it is (a CSV as text/csv),
 * otherwise as JSON.
 */
export async function request(method, path, body, { retried = false, contentType } = {}) {
  const url = path.startsWith('/admin/') ? path : `${ADMIN_API}${path}`;
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = contentType ?? 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['x-csrf-token'] = csrfToken;
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined || contentType ? body : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiProblem(0, { detail: 'The service could not be reached. Check that it is running and try again.' });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    const problem = new ApiProblem(response.status, json);
    if (response.status === 429) problem.message = friendlyWait(problem.message, Number(response.headers.get('retry-after')));
    // A refused second-factor code is 401 too, but for the code: the session itself is fine.
    if (response.status === 401 && !url.startsWith('/admin/session') && (problem.code ?? 'unauthorized') === 'unauthorized') sessionLostHandler(problem);
    if (response.status === 403 && problem.code === 'reauthentication_required' && reauthenticationHandler && !retried) {
      if (await reauthenticationHandler(problem)) return request(method, path, body, { retried: true, contentType });
      // Cancelled: the form or toast says so in words, not with the API's instructions to a script.
      problem.message = 'Not done: you did not confirm it is you.';
      problem.cancelled = true;
    }
    if (response.status === 403 && problem.code === 'second_factor_enrolment_required') enrolmentRequiredHandler(problem);
    throw problem;
  }
  return json;
}

/** "about 15 minutes (at 14:32)" for a wait of `seconds`. */
export function waitWords(seconds, now = Date.now()) {
  const at = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' }).format(new Date(now + seconds * 1000));
  if (seconds < 60) return 'less than a minute';
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 90) return `about ${minutes} ${minutes === 1 ? 'minute' : 'minutes'} (at ${at})`;
  const hours = Math.round(minutes / 60);
  return `about ${hours} hours (at ${at})`;
}

/** A throttling message in words people use: never "Try again in 894 seconds". */
function friendlyWait(message, retryAfterSeconds) {
  const seconds = Number.isFinite(retryAfterSeconds) && retryAfterSeconds > 0 ? retryAfterSeconds : Number(/(\d+) seconds?/.exec(message)?.[1]);
  const lead = message.replace(/\s*Try again in \d+ seconds?\.?\s*$/, '').trim() || 'Too many attempts.';
  return Number.isFinite(seconds) && seconds > 0 ? `${lead} Try again in ${waitWords(seconds)}.` : lead;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body);
export const patch = (path, body) => request('PATCH', path, body);
export const del = (path) => request('DELETE', path);

/** Builds a query string from the defined, non-empty values of `params`. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Every item of a paginated admin list, following next_cursor (lists here are small: endpoints). */
export async function listAll(path, maxPages = 20) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const separator = path.includes('?') ? '&' : '?';
    const answer = await get(cursor ? `${path}${separator}cursor=${encodeURIComponent(cursor)}` : path);
    items.push(...(answer.data ?? []));
    if (!answer.pagination?.has_more || !answer.pagination.next_cursor) break;
    cursor = answer.pagination.next_cursor;
  }
  return items;
}
