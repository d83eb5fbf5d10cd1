/**
 * The request timeouts measure the client, not the server. Node's HTTP server checks
 * REQUEST_TIMEOUT_MS / HEADERS_TIMEOUT_MS on a timer against what its parser has seen. When this
 * thread has been busy, the timer runs before the bytes waiting in the socket are read (timers come
 * before I/O in an event-loop turn), so a request whose body had arrived in full was answered 408
 * "did not arrive in time"; and while a route waits for the database before reading its body, the
 * socket is not read at all, so the wait was the server's too.
 *
 * So when Node calls a request late, we first look: if the request's body is not being read (its
 * stream paused or not yet taken by a route), the wait is ours and nothing is answered (Node asks
 * again at its next check). Otherwise everything the socket holds is read (turns of the event loop
 * until no more bytes come), and only a request still incomplete after that, whose head was already
 * in when Node asked, is answered 408: that client really has not sent it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/** The request each connection is on (the parser's current message). */
const current = new WeakMap<Socket, IncomingMessage>();
/** Connections being read out before a 408 is decided. */
const draining = new WeakSet<Socket>();

/** Follows each connection's current request (call once on the HTTP server). */
export function trackRequests(server: Server): void {
  server.on('request', (request: IncomingMessage) => current.set(request.socket, request));
}

/** Longest we keep reading a connection that keeps delivering before deciding anyway. */
const MAX_DRAIN_TURNS = 1000;

/**
 * Called for ERR_HTTP_REQUEST_TIMEOUT: runs `answer` (the 408) only when the client is the one late.
 */
export function onRequestTimeout(socket: Socket, answer: () => void): void {
  if (draining.has(socket)) return;
  const before = current.get(socket);
  const pending = before && !before.complete ? before : undefined;
  // A request whose body the server is not reading yet (a route waiting for the database, a full
  // stream buffer): the client cannot be faulted for bytes we do not take.
  if (pending && (pending.readableFlowing !== true || pending.isPaused())) return;
  draining.add(socket);
  let bytes = socket.bytesRead;
  let turns = 0;
  const look = () => {
    if (socket.destroyed) return void draining.delete(socket);
    if (socket.bytesRead !== bytes && turns++ < MAX_DRAIN_TURNS) {
      bytes = socket.bytesRead;
      setImmediate(look);
      return;
    }
    draining.delete(socket);
    // A head that only now got parsed was in time (its body's own deadline is Node's next check);
    // a body that is complete now had arrived: Node stops counting either.
    if (current.get(socket) !== before || pending?.complete) return;
    answer();
  };
  // One turn first: the poll phase reads what the kernel holds for this socket.
  setImmediate(look);
}
