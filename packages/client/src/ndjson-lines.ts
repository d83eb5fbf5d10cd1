/**
 * Newline-delimited JSON read from a byte stream one line at a time: only the current chunk and an
 * incomplete trailing line are held, and the next chunk is read only when the consumer asks for the
 * next value, so a long export flows through in constant memory with TCP back-pressure.
 */

/** The body ended inside a line: the connection was lost (every line of an export ends with a line break). */
export class TruncatedBodyError extends Error {
  override readonly name = 'TruncatedBodyError';
}

/**
 * Yields every non-empty line of `body`, decoded as UTF-8, without its line break. Throws
 * TruncatedBodyError when the body ends without a final line break, and the signal's reason once
 * `signal` fires. The reader is cancelled on abort because fetch alone does not always settle a
 * read already waiting on the body (seen on Node 20: an export aborted mid-stream hung forever).
 */
export async function* lines(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<string> {
  const reader = body.getReader();
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  const decoder = new TextDecoder('utf-8');
  let rest = '';
  let done = false;
  try {
    while (true) {
      signal?.throwIfAborted();
      const chunk = await reader.read();
      signal?.throwIfAborted();
      if (chunk.done) break;
      rest += decoder.decode(chunk.value, { stream: true });
      let start = 0;
      for (let end = rest.indexOf('\n'); end !== -1; end = rest.indexOf('\n', start)) {
        const line = rest.slice(start, end).trim();
        start = end + 1;
        if (line !== '') yield line;
      }
      rest = rest.slice(start);
    }
    rest += decoder.decode();
    done = true;
    if (rest.trim() !== '') throw new TruncatedBodyError(`the body ended inside a line (${rest.length} characters without a line break)`);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A consumer that stops early (break, throw) closes the connection instead of draining it.
    if (!done) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
