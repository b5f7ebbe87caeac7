import { setTimeout as sleep } from 'node:timers/promises';
import { FileSecretStore } from '../../main/identity/index.ts';

// Stores COUNT secrets named `<PREFIX>-<n>` in the file secret store of HOME, one at a time, as
// each bucket created from the command line stores its key; starting at START_AT (ms since
// 1970), so that writers started one after another write at once.
// Run as: node --import tsx secret-writer.ts HOME PREFIX COUNT START_AT

const [home, prefix, count, startAt] = process.argv.slice(2);
if (!home || !prefix || !count || !startAt)
  throw new Error('usage: secret-writer.ts HOME PREFIX COUNT START_AT');
await sleep(Math.max(0, Number(startAt) - Date.now()));
const store = new FileSecretStore(home);
for (let n = 0; n < Number(count); n += 1)
  await store.set(`${prefix}-${n}`, `secret ${prefix} ${n}`);
