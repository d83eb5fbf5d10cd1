/**
 * A real listening server for the client tests (the client speaks HTTP through fetch, so inject()
 * is not enough): the test app on a fresh database of `backend`, listening on a free loopback port,
 * with a token carrying the four read scopes.
 */
import type { Backend } from '../../src/db/database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { expect } from 'vitest';
import { StoreApiClient, StoreApiError, type StoreApiClientOptions } from '../../packages/client/src/index.ts';

export interface ClientTestServer {
  t: TestApp;
  /** http://127.0.0.1:<port> */
  baseUrl: string;
  /** A read token `sia_…`. */
  token: string;
  /** A client of this server; retries are fast (tests wait for nothing longer than needed). */
  client(options?: Partial<StoreApiClientOptions>): StoreApiClient;
  close(): Promise<void>;
}

export async function startClientTestServer(backend: Backend, env: Record<string, string> = {}): Promise<ClientTestServer> {
  const t = await buildTestApp(backend, env);
  const baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { authorization } = await t.auth();
  const token = authorization.slice('Bearer '.length);
  return {
    t,
    baseUrl,
    token,
    client: (options = {}) => new StoreApiClient({ baseUrl, token, retryBaseDelayMs: 10, retryMaxDelayMs: 50, ...options }),
    close: () => t.close(),
  };
}

/** The StoreApiError `promise` rejects with (fails the test when it resolves or rejects with anything else). */
export async function failureOf(promise: Promise<unknown>): Promise<StoreApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreApiError);
  return error as StoreApiError;
}
