// A restore that kills its own process (SIGKILL, no cleanup), as a crash or power cut would,
// once N files are written whole (some renamed to their names, some still under temporary
// names, others part-written).
// Run as: node --import tsx crashing-restore.ts HOME BUCKET TARGET N
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

const [home, bucket, target, count] = process.argv.slice(2);
if (home === undefined || bucket === undefined || target === undefined || count === undefined)
  throw new Error('usage: HOME BUCKET TARGET N');
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  afterFileRestored: (written) => {
    if (written >= Number(count)) process.kill(process.pid, 'SIGKILL');
  },
});
await engine.restore({ bucket, to: target, overwrite: false });
process.stdout.write('restore finished without crashing\n');
