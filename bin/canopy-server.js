#!/usr/bin/env node
// Runs the compiled server when `npm run build` made it from the sources as they are, else the
// TypeScript sources through tsx, so the command works from a fresh clone without a build step
// (bin/entry-point.js).
import { importEntry } from './entry-point.js';

const { main } = await importEntry('server/cli.ts');
process.exitCode = await main(process.argv.slice(2));
