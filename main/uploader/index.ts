// Pushes versions and uploads their shards. May import main/api, protocol, service, packer.
export * from './backup-input.ts';
export { backupSource } from './backup-source.ts';
export * from './browsable-tree.ts';
export * from './previous-tree.ts';
export * from './progress-meter.ts';
export * from './work-meter.ts';
export * from './shard-target.ts';
export * from './shard-writer.ts';
export * from './unchanged-source.ts';
export * from './other-source.ts';
export * from './source-too-large.ts';
