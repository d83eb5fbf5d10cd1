// Node 20 lacks Promise.withResolvers (Node 22), which PostGraphile 5 uses on every request.
if (!Promise.withResolvers) {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
