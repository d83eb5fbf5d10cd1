/**
 * What every part of the service is built from: configuration, the database handle and the root
 * logger. Entry points create it; the app factory and the worker only receive it.
 */
import type { Logger } from 'pino';
import type { Config } from './config/config.ts';
import type { DatabaseHandle } from './db/database.ts';

export interface AppContext {
  readonly config: Config;
  readonly database: DatabaseHandle;
  readonly logger: Logger;
  /**
   * The time (ms since the epoch) of TOTP time steps and fresh-proof windows (admin/second factor);
   * default Date.now. Tests inject a clock to move across time steps without sleeping.
   */
  readonly now?: () => number;
}
