// A backup that kills its own process (SIGKILL, no cleanup), as a crash or power cut would, at
// a chosen point: `read:N` after N files were read (packing, nothing pushed yet), `shard:N`
// once N shards were confirmed (`shard:0`: pushed and queued, nothing uploaded).
// Run as: node --import tsx crashing-backup.ts HOME SOURCE POINT
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

const [home, source, point] = process.argv.slice(2);
const [stage, count] = (point ?? '').split(':');
if (home === undefined || source === undefined || count === undefined)
  throw new Error('usage: HOME SOURCE read:N|shard:N');
const at = Number(count);
let filesRead = 0;
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  shardTargetBytes: 1_500_000,
  afterFileRead: () => {
    filesRead += 1;
    if (stage === 'read' && filesRead >= at) process.kill(process.pid, 'SIGKILL');
    return Promise.resolve();
  },
  afterShardConfirmed: (confirmed) => {
    if (stage === 'shard' && confirmed >= at) process.kill(process.pid, 'SIGKILL');
  },
});
// A folder emptied on purpose (the model-based test deletes every file) is backed up as it is.
await engine.backup({ dir: source, bucket: 'Crash', allowEmpty: true });
// The embedded service listens until closed: the process ends only then.
await engine.close();
process.stdout.write('backup finished without crashing\n');
