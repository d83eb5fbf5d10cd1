/**
 * A promise and the function that resolves it, for a test that holds one side at a chosen point
 * (a write stamped but not committed, say) until the other side says so.
 */
export function signal(): [Promise<void>, () => void] {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return [promise, resolve];
}
