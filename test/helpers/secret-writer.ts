import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { FileSecretStore } from '../../main/identity/index.ts';

// Stores COUNT secrets named `<PREFIX>-<n>` in the file secret store of HOME, one at a time, as
// each bucket created from the command line stores its key. It says `ready` once started, then
// waits for the file GO to exist, so that writers started one after another, however slowly on
// a busy machine, write at once.
// Run as: node --import tsx secret-writer.ts HOME PREFIX COUNT GO

const [home, prefix, count, go] = process.argv.slice(2);
if (!home || !prefix || !count || !go)
  throw new Error('usage: secret-writer.ts HOME PREFIX COUNT GO');
const store = new FileSecretStore(home);
process.stdout.write('ready\n');
while (!existsSync(go)) await sleep(5);
for (let n = 0; n < Number(count); n += 1)
  await store.set(`${prefix}-${n}`, `secret ${prefix} ${n}`);
