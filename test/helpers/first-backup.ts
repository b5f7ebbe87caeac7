import type { BackupResult, Engine } from '../../main/index.ts';

/**
 * Logs `engine` in to its embedded service, makes the backup bucket `bucket` and backs `source`
 * up into it: the start of a scenario about what comes after a backup.
 */
export async function firstBackup(
  engine: Engine,
  source: string,
  bucket: string,
): Promise<BackupResult> {
  await engine.loginLocal({});
  await engine.createBucket({ name: bucket, type: 'backup', storageClass: 'hot' });
  return engine.backup({ dir: source, bucket });
}
