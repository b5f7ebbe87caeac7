// A backup in a process of its own, to a service the test runs, that stalls after its first
// confirmed shard for STALL_MS (its whole process, as a link too slow for the upload window
// would), so that its upload nears its window's end. The test kills it where it wants.
// Run as: node --import tsx stalled-backup.ts HOME SOURCE BUCKET STALL_MS
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';

const [home, source, bucket, stallText] = process.argv.slice(2);
if (home === undefined || source === undefined || bucket === undefined || stallText === undefined)
  throw new Error('usage: HOME SOURCE BUCKET STALL_MS');
let stalled = false;
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  shardTargetBytes: 1_500_000,
  afterShardConfirmed: (confirmed) => {
    if (stalled || confirmed !== 1) return;
    stalled = true;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(stallText));
  },
});
await engine.backup({ dir: source, bucket });
await engine.close();
process.stdout.write('backup finished without being killed\n');
