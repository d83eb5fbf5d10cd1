/**
 * Log records for a person at a terminal: one short line each instead of pino's JSON (decision
 * 0033). A request is one line when it completes (`GET /api/v1/products?limit=2 200 3.1 ms`), its
 * "incoming request" record only remembered for that line; any other record is its time, its level
 * when above info, its message and its remaining fields as key=value. Anywhere but a terminal the
 * JSON lines stay as they are (main/runtime.ts chooses).
 */

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every record carries or that the line shows otherwise. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'request_id', 'req', 'res', 'responseTime', 'err']);
/** Requests seen incoming and not yet completed, at most this many remembered. */
const MAX_OPEN_REQUESTS = 1000;

type LogRecord = Record<string, unknown> & { level?: number; time?: string; msg?: string };

function clock(time: unknown): string {
  const text = typeof time === 'string' ? time : new Date().toISOString();
  return text.slice(11, 19);
}

function fieldText(value: unknown): string {
  if (typeof value === 'string') return /\s/.test(value) || value === '' ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/** Turns JSON log lines into short lines; keeps the request line of each request until it completes. */
export class TerminalLogFormatter {
  readonly #open = new Map<string, string>();

  /** The line to show for one record (with its newline), or undefined to show nothing. */
  format(record: LogRecord): string | undefined {
    const id = typeof record.request_id === 'string' ? record.request_id : undefined;
    const req = record.req as { method?: string; url?: string } | undefined;
    if (record.msg === 'incoming request' && id !== undefined && req) {
      if (this.#open.size >= MAX_OPEN_REQUESTS) this.#open.delete(this.#open.keys().next().value!);
      this.#open.set(id, `${req.method ?? '?'} ${req.url ?? '?'}`);
      return undefined;
    }
    const level = record.level ?? 30;
    const prefix = `${clock(record.time)} ${level > 30 ? `${LEVELS[level] ?? level} ` : ''}`;
    if (record.msg === 'request completed' && id !== undefined) {
      const request = this.#open.get(id) ?? 'request';
      this.#open.delete(id);
      const status = (record.res as { statusCode?: number } | undefined)?.statusCode ?? '?';
      const ms = typeof record.responseTime === 'number' ? ` ${record.responseTime.toFixed(1)} ms` : '';
      return `${prefix}${request} ${status}${ms}\n`;
    }
    const extra = Object.entries(record)
      .filter(([key]) => !SHOWN.has(key))
      .map(([key, value]) => `${key}=${fieldText(value)}`);
    const err = record.err as { message?: string; stack?: string } | undefined;
    const errText = err ? (level >= 50 && err.stack ? `\n${err.stack}` : ` (${err.message ?? 'error'})`) : '';
    return `${prefix}${record.msg ?? ''}${extra.length > 0 ? `  ${extra.join(' ')}` : ''}${errText}\n`;
  }
}

/** A pino destination writing the short lines to `out` (a terminal). */
export function terminalLogStream(out: NodeJS.WritableStream): { write(line: string): void } {
  const formatter = new TerminalLogFormatter();
  return {
    write(line: string) {
      let record: LogRecord;
      try {
        record = JSON.parse(line) as LogRecord;
      } catch {
        out.write(line);
        return;
      }
      const text = formatter.format(record);
      if (text !== undefined) out.write(text);
    },
  };
}
