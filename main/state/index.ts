// The engine's SQLite state: the enrolled account, known buckets, the file index, the upload
// queue, upload speeds, shard limits and the exclude rules kept per source; and the home's
// locks and staging folders. No secrets: keys live in the SecretStore. May import main/api only.

export * from './account-state.ts';
export * from './backup-lock.ts';
export * from './blocks-to-resend.ts';
export * from './canopy-home.ts';
export * from './computer-name.ts';
export * from './database.ts';
export * from './file-index.ts';
export * from './home-lock.ts';
export * from './known-active-versions.ts';
export * from './known-versions.ts';
export * from './known-version-buckets.ts';
export * from './metadata-to-store-again.ts';
export * from './restore-mark.ts';
export * from './restored-files.ts';
export * from './shard-limits.ts';
export * from './shard-plan.ts';
export * from './source-excludes.ts';
export * from './staging-dirs.ts';
export * from './state-damage.ts';
export * from './state-repair.ts';
export * from './upload-queue.ts';
export * from './upload-speeds.ts';
export * from './version-totals.ts';
export * from './retention-policies.ts';
export * from './free-space.ts';
export * from './shown-notifications.ts';
