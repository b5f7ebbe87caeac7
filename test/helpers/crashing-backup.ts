// A backup that kills its own process (SIGKILL, no cleanup) after N shards were confirmed, as a
// crash or power cut would. Run as: node --import tsx crashing-backup.ts HOME SOURCE N
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

const [home, source, after] = process.argv.slice(2);
if (home === undefined || source === undefined || after === undefined)
  throw new Error('usage: HOME SOURCE N');
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  shardTargetBytes: 1_500_000,
  afterShardConfirmed: (count) => {
    if (count >= Number(after)) process.kill(process.pid, 'SIGKILL');
  },
});
await engine.backup({ dir: source, bucket: 'Crash' });
process.stdout.write('backup finished without crashing\n');
