import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // The tests run the client package's source (packages/client/src), never its compiled dist/: a
    // bug in the source must fail them. Child processes get the same through NODE_OPTIONS
    // (--conditions=source, the "source" condition of the package's exports).
    alias: [
      { find: /^@store-api\/client$/, replacement: fileURLToPath(new URL('packages/client/src/index.ts', import.meta.url)) },
      { find: /^@store-api\/client\/webhook-signature$/, replacement: fileURLToPath(new URL('packages/client/src/webhook-signature.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    teardownTimeout: 30_000,
    reporters: ['default'],
  },
});
