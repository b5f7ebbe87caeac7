// A restore that kills its own process (SIGKILL, no cleanup), as a crash or power cut would,
// at the kill point N or `<N>B` names (restore-kill-point.ts).
// Run as: node --import tsx crashing-restore.ts HOME BUCKET TARGET N|<N>B
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { restoreKillPoint } from './restore-kill-point.ts';

const [home, bucket, target, count] = process.argv.slice(2);
if (home === undefined || bucket === undefined || target === undefined || count === undefined)
  throw new Error('usage: HOME BUCKET TARGET N|<N>B');
const killPoint = restoreKillPoint(count);
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  ...killPoint.deps,
});
await engine.restore({ bucket, to: target, overwrite: false, ...killPoint.request });
process.stdout.write('restore finished without crashing\n');
// Its embedded service would keep the process running.
await engine.close();
