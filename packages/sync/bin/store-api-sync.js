#!/usr/bin/env node
// Thin launcher: registers the TypeScript loader, then hands over to the CLI.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/sync-cli.ts');
