// Runs engine commands as `nobody` (uid 65534), for tests of permission errors: root reads any
// file, so the real behaviour needs another user. Every module is loaded while still root, then
// privileges are dropped, so the test does not depend on where the repository lives.
// Usage: node --import tsx engine-as-nobody.ts HOME login | backup SOURCE BUCKET
//   | restore BUCKET TARGET [--overwrite] | plan-restore BUCKET TARGET [--overwrite]
//   | crash-restore BUCKET TARGET N|<N>B (killed with SIGKILL at that point: restore-kill-point.ts)
import { EngineError } from '../../main/api/index.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { restoreKillPoint } from './restore-kill-point.ts';

const [home, command, ...args] = process.argv.slice(2);
if (home === undefined || command === undefined) throw new Error('usage: HOME COMMAND ...');
if (!process.setgroups || !process.setgid || !process.setuid)
  throw new Error('needs a POSIX system');
process.setgroups([]);
process.setgid(65534);
process.setuid(65534);
const killPoint = command === 'crash-restore' ? restoreKillPoint(args[2] ?? '') : undefined;
// In this thread, not a worker: nothing may be loaded from the repository after the drop.
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  ...killPoint?.deps,
});
try {
  switch (command) {
    case 'login':
      await engine.loginLocal({});
      await engine.createBucket({ name: args[0] ?? 'Docs', type: 'backup', storageClass: 'hot' });
      break;
    case 'backup':
      process.stdout.write(
        `${JSON.stringify(await engine.backup({ dir: args[0] ?? '', bucket: args[1] ?? '' }))}\n`,
      );
      break;
    case 'restore':
      process.stdout.write(
        `${JSON.stringify(
          await engine.restore({
            bucket: args[0] ?? '',
            to: args[1] ?? '',
            overwrite: args[2] === '--overwrite',
          }),
        )}\n`,
      );
      break;
    case 'crash-restore':
      await engine.restore({
        bucket: args[0] ?? '',
        to: args[1] ?? '',
        overwrite: false,
        ...killPoint?.request,
      });
      throw new Error('the restore finished without crashing');
    case 'plan-restore': {
      const plan = await engine.planRestore({
        bucket: args[0] ?? '',
        to: args[1] ?? '',
        overwrite: args[2] === '--overwrite',
      });
      process.stdout.write(`${JSON.stringify(plan)}\n`);
      break;
    }
    default:
      throw new Error(`unknown command ${command}`);
  }
} catch (error) {
  // An EngineError as the CLI shows it, one line with its code; anything else with its stack.
  if (!(error instanceof EngineError)) throw error;
  process.stderr.write(`${error.code}: ${error.message}\n`);
  process.exitCode = 1;
} finally {
  await engine.close();
}
