/**
 * Request transactions: every statement of one request — an admin write's claim of its
 * Idempotency-Key, the services' own transactions, read-backs, its audit entry and its stored answer
 * — in ONE database transaction on one connection, committed just before the answer leaves
 * (decision 0027). A crash or a lost connection at any moment then leaves all of it or none of it.
 *
 * How: the dialect of the Kysely instance is wrapped (`withRequestTransactions`). Code running inside
 * `RequestTransaction.run(fn)` (AsyncLocalStorage) that asks for a connection gets the request's
 * pinned connection; the first such statement opens the transaction (BEGIN). A transaction begun
 * inside it (`db.transaction()`, `runWrite`) becomes a SAVEPOINT: its commit releases the savepoint,
 * its rollback rolls back to it, so each service call stays all-or-nothing and a deadlock's rerun
 * still works. Each has a savepoint of its own name: one begun inside another nests; two begun side
 * by side (Promise.all) cannot quietly tangle — ending the older first ends the younger's savepoint
 * too, and the younger's own end then fails, which fails the request and rolls it all back. Code
 * outside `run` (other requests, the worker) is untouched.
 *
 * States (one request):
 *  - idle: nothing asked for a connection yet (a request that never touches the database costs none);
 *  - open: a connection is pinned and BEGIN was sent;
 *  - ended: committed or rolled back, the connection given back. Statements still made inside `run`
 *    after the end go to the pool one by one, as outside.
 *
 * PGlite has one connection: while a request transaction is open every other statement of the
 * process waits for it. Kysely's own mutex for single-connection dialects is replaced by ours here,
 * because it would make the request wait for the connection it already holds; its turns
 * (db/connection-turns.ts) let reads pass before the next step of a long write in steps.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { StoreFailedError } from './storage-health.ts';
import { ConnectionTurns } from './connection-turns.ts';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

const current = new AsyncLocalStorage<RequestTransaction>();

/** Called before each statement a request transaction sends (its SQL text); for tests, never set in production. */
export type RequestStatementHook = (sqlText: string, transaction: RequestTransaction) => void | Promise<void>;

let statementHook: RequestStatementHook | undefined;

/**
 * Sets (or clears, with undefined) the hook called before every statement of every request
 * transaction, BEGIN, savepoints and COMMIT included: tests lose the connection at each of them.
 */
export function setRequestStatementHook(hook: RequestStatementHook | undefined): void {
  statementHook = hook;
}

async function beforeStatement(sqlText: string, transaction: RequestTransaction): Promise<void> {
  if (statementHook) await statementHook(sqlText, transaction);
}

/**
 * The connection handed to a statement (or a transaction) of a request transaction: the pinned one,
 * never released by them. One per acquisition, so a transaction begun on it knows its savepoint.
 */
class PinnedConnection implements DatabaseConnection {
  /** The savepoint of the transaction begun on this acquisition, if any. */
  savepoint: string | undefined;
  constructor(
    readonly owner: RequestTransaction,
    readonly inner: DatabaseConnection,
  ) {}
  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    await beforeStatement(compiledQuery.sql, this.owner);
    return this.owner.send(() => this.inner.executeQuery<R>(compiledQuery));
  }
  streamQuery<R>(compiledQuery: CompiledQuery, chunkSize: number): AsyncIterableIterator<QueryResult<R>> {
    return this.owner.sendStream(() => this.inner.streamQuery<R>(compiledQuery, chunkSize));
  }
}

/** The transaction of one request. Make one per request, run its code in `run`, end it with `commit` or `rollback`. */
export class RequestTransaction {
  #driver: RequestTransactionDriver | undefined;
  #state: 'idle' | 'open' | 'ended' = 'idle';
  #pinned: PinnedConnection | undefined;
  #opening: Promise<PinnedConnection> | undefined;
  #releaseTurn: (() => void) | undefined;
  #savepoints = 0;
  /** Settles when everything sent on the pinned connection so far has (never rejects). */
  #sent: Promise<unknown> = Promise.resolve();
  readonly #afterCommit = new Set<() => void>();

  /** idle, open or ended (see the file's comment). */
  get state(): 'idle' | 'open' | 'ended' {
    return this.#state;
  }

  /** Runs `fn` so that its statements (and those of everything it awaits) join this transaction. */
  run<T>(fn: () => T): T {
    return current.run(this, fn);
  }

  /**
   * Sends `fn`'s one statement on the pinned connection once everything sent before it has settled:
   * statements of one request made side by side (Promise.all), savepoints and the end included, go
   * out one after another in the order they were made. pg would queue them itself, but that is
   * deprecated and pg@9 refuses a statement sent while its connection is busy.
   */
  send<T>(fn: () => Promise<T>): Promise<T> {
    const turn = this.#sent.then(fn);
    this.#sent = turn.catch(() => undefined);
    return turn;
  }

  /** As `send`, for a stream: the connection is its own until the stream ends (read through or returned). */
  async *sendStream<R>(open: () => AsyncIterableIterator<R>): AsyncIterableIterator<R> {
    let ended!: () => void;
    const before = this.#sent;
    this.#sent = new Promise<void>((resolve) => {
      ended = resolve;
    });
    try {
      await before;
      yield* open();
    } finally {
      ended();
    }
  }

  /** Calls `fn` after the commit (never after a rollback): for signals that must not run ahead of it. */
  afterCommit(fn: () => void): void {
    this.#afterCommit.add(fn);
  }

  /** The server's process id of the pinned connection (tests terminate it), or undefined while idle. */
  async backendPid(): Promise<number | undefined> {
    if (this.#state !== 'open') return undefined;
    const pinned = this.#pinned!;
    const { rows } = await this.send(() => pinned.inner.executeQuery<{ pid: number }>(CompiledQuery.raw('SELECT pg_backend_pid() AS pid')));
    return rows[0]?.pid;
  }

  async commit(): Promise<void> {
    const pinned = await this.#end();
    if (pinned) {
      try {
        await beforeStatement('COMMIT', this);
        await this.send(() => this.#driver!.inner.commitTransaction(pinned.inner));
      } catch (error) {
        // Never give the connection back inside a transaction (the next user would write into it,
        // and commit it): roll back what is left. On a lost connection this fails too, quietly.
        await this.send(() => this.#driver!.inner.rollbackTransaction(pinned.inner)).catch(() => undefined);
        throw error;
      } finally {
        await this.#giveBack(pinned);
      }
    }
    for (const fn of this.#afterCommit) fn();
  }

  async rollback(): Promise<void> {
    const pinned = await this.#end();
    if (!pinned) return;
    try {
      await this.send(() => this.#driver!.inner.rollbackTransaction(pinned.inner));
    } finally {
      await this.#giveBack(pinned);
    }
  }

  /**
   * Runs `fn` outside this transaction, its own transactions committing on their own (a long write
   * in committed steps, decision 0036). What this request wrote so far is committed first and the
   * transaction goes back to idle, so its later statements (the audit entry, the stored answer) open
   * a new one. Only for a single connection (PGlite), where the Idempotency-Key's claim is held in
   * this process and not by the transaction: on PostgreSQL that early commit would release the
   * key's lock to other processes, so it is refused there.
   */
  async detach<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#state === 'ended') throw new Error('the request transaction has ended');
    const pinned = this.#opening ? await this.#opening : this.#pinned;
    if (pinned) {
      if (!this.#driver!.singleConnection) throw new Error('detach is for a single-connection database');
      try {
        await this.send(() => this.#driver!.inner.commitTransaction(pinned.inner));
      } finally {
        await this.#giveBack(pinned);
        this.#state = 'idle';
      }
    }
    return current.exit(fn);
  }

  /** Ends the state machine; returns the pinned connection when there is a transaction to finish. */
  async #end(): Promise<PinnedConnection | undefined> {
    if (this.#state === 'ended') return undefined;
    // A statement still opening the transaction: let it finish, then end what it opened.
    const pinned = this.#opening ? await this.#opening.catch(() => undefined) : this.#pinned;
    this.#state = 'ended';
    return pinned;
  }

  async #giveBack(pinned: PinnedConnection): Promise<void> {
    this.#pinned = undefined;
    await this.#driver!.giveBack(pinned.inner, this.#releaseTurn);
    this.#releaseTurn = undefined;
  }

  /** The pinned connection for a statement of `driver`, or undefined when it is not ours to pin. */
  connectionFor(driver: RequestTransactionDriver): Promise<PinnedConnection> | undefined {
    if (this.#state === 'ended') return undefined;
    if (this.#driver && this.#driver !== driver) return undefined; // another database's statement
    if (this.#pinned) return Promise.resolve(new PinnedConnection(this, this.#pinned.inner));
    this.#opening ??= this.#open(driver);
    return this.#opening.then((pinned) => new PinnedConnection(this, pinned.inner));
  }

  async #open(driver: RequestTransactionDriver): Promise<PinnedConnection> {
    try {
      const { connection, releaseTurn } = await driver.takeConnection();
      try {
        await driver.inner.beginTransaction(connection, {});
      } catch (error) {
        await driver.giveBack(connection, releaseTurn);
        throw error;
      }
      this.#driver = driver;
      this.#releaseTurn = releaseTurn;
      this.#pinned = new PinnedConnection(this, connection);
      this.#state = 'open';
      return this.#pinned;
    } finally {
      this.#opening = undefined;
    }
  }

  /** A transaction begun by a statement inside this one: a savepoint of its own. */
  async beginNested(pinned: PinnedConnection): Promise<void> {
    const name = `request_nested_${++this.#savepoints}`;
    await beforeStatement(`SAVEPOINT ${name}`, this);
    await this.send(() => pinned.inner.executeQuery(CompiledQuery.raw(`SAVEPOINT ${name}`)));
    pinned.savepoint = name;
  }

  async endNested(pinned: PinnedConnection, outcome: 'commit' | 'rollback'): Promise<void> {
    const name = pinned.savepoint;
    if (!name) throw new Error('no transaction was begun on this connection');
    // The savepoint is forgotten only once it has ended: when its RELEASE fails (a lost
    // connection), Kysely rolls the transaction back, and that rollback must still find it (it
    // once threw "no transaction was begun" instead, and a lost connection became a 500).
    if (outcome === 'rollback') {
      try {
        await beforeStatement(`ROLLBACK TO SAVEPOINT ${name}`, this);
        await this.send(() => pinned.inner.executeQuery(CompiledQuery.raw(`ROLLBACK TO SAVEPOINT ${name}`)));
      } catch (error) {
        // A store that failed for good (the embedded log could not be written) refuses every
        // statement: the request's transaction can never commit, and the error that made the
        // service roll back (507, naming the full disk) must reach the client, not this refusal.
        if (error instanceof StoreFailedError) {
          pinned.savepoint = undefined;
          return;
        }
        throw error;
      }
    }
    await beforeStatement(`RELEASE SAVEPOINT ${name}`, this);
    await this.send(() => pinned.inner.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${name}`)));
    pinned.savepoint = undefined;
  }
}

/** The request transaction `fn` runs in (when it is still open or idle), for code that must act at its commit. */
export function activeRequestTransaction(): RequestTransaction | undefined {
  const tx = current.getStore();
  return tx && tx.state !== 'ended' ? tx : undefined;
}

/** The dialect's driver with request transactions (see the file's comment). */
class RequestTransactionDriver implements Driver {
  readonly #singleConnection: ConnectionTurns | undefined;

  /** Whether the database has one connection (PGlite), taken in turns. */
  get singleConnection(): boolean {
    return this.#singleConnection !== undefined;
  }

  constructor(
    readonly inner: Driver,
    singleConnection: boolean,
    readonly prepare: ((connection: DatabaseConnection) => Promise<void>) | undefined,
  ) {
    this.#singleConnection = singleConnection ? new ConnectionTurns() : undefined;
  }

  init(): Promise<void> {
    return this.inner.init();
  }

  /**
   * A connection of the inner driver (after our turn on a single-connection dialect: a statement's,
   * or a step's inside `runGivingWay`, db/connection-turns.ts).
   */
  async takeConnection(): Promise<{ connection: DatabaseConnection; releaseTurn: (() => void) | undefined }> {
    const releaseTurn = this.#singleConnection ? await this.#singleConnection.take() : undefined;
    let connection: DatabaseConnection | undefined;
    try {
      connection = await this.inner.acquireConnection();
      await this.prepare?.(connection);
      return { connection, releaseTurn };
    } catch (error) {
      if (connection) await this.inner.releaseConnection(connection).catch(() => undefined);
      releaseTurn?.();
      throw error;
    }
  }

  async giveBack(connection: DatabaseConnection, releaseTurn: (() => void) | undefined): Promise<void> {
    try {
      await this.inner.releaseConnection(connection);
    } finally {
      releaseTurn?.();
    }
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const pinned = current.getStore()?.connectionFor(this);
    if (pinned) return pinned;
    const { connection, releaseTurn } = await this.takeConnection();
    if (releaseTurn) this.#turnOf.set(connection, releaseTurn);
    return connection;
  }

  readonly #turnOf = new WeakMap<DatabaseConnection, () => void>();

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof PinnedConnection) return;
    const releaseTurn = this.#turnOf.get(connection);
    this.#turnOf.delete(connection);
    await this.giveBack(connection, releaseTurn);
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (connection instanceof PinnedConnection) return connection.owner.beginNested(connection);
    return this.inner.beginTransaction(connection, settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof PinnedConnection) return connection.owner.endNested(connection, 'commit');
    return this.inner.commitTransaction(connection);
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof PinnedConnection) return connection.owner.endNested(connection, 'rollback');
    return this.inner.rollbackTransaction(connection);
  }

  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.inner.savepoint?.(unwrap(connection), name, compile);
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.inner.rollbackToSavepoint?.(unwrap(connection), name, compile);
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.inner.releaseSavepoint?.(unwrap(connection), name, compile);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}

function unwrap(connection: DatabaseConnection): DatabaseConnection {
  return connection instanceof PinnedConnection ? connection.inner : connection;
}

/**
 * `dialect` with request transactions (see the file's comment). `prepare` is run on each connection
 * as it is taken, before any transaction begins on it (the embedded database's store scope,
 * db/store-scope.ts).
 */
export function withRequestTransactions(dialect: Dialect, prepare?: (connection: DatabaseConnection) => Promise<void>): Dialect {
  const adapter = dialect.createAdapter();
  const single = !adapter.supportsMultipleConnections;
  // Kysely serialises a single-connection dialect itself, before the driver is asked; we do it in
  // the driver instead (RequestTransactionDriver.takeConnection), so the adapter says "several".
  const adapterForKysely = new Proxy(adapter, {
    get(target, property) {
      if (property === 'supportsMultipleConnections') return true;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as DialectAdapter;
  return {
    createAdapter: () => adapterForKysely,
    createDriver: () => new RequestTransactionDriver(dialect.createDriver(), single, prepare),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db: Kysely<unknown>): DatabaseIntrospector => dialect.createIntrospector(db),
  };
}
