#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so the command works from a fresh clone
// without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/canopy.ts');
process.exitCode = await main(process.argv.slice(2));
