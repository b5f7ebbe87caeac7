// Files to UnixFS blocks to CARs (§17). Deterministic; no network. May import main/api,
// main/protocol and main/scanner.
export * from './pack-source.ts';
export * from './unixfs-settings.ts';
export * from './leaf-list.ts';
export * from './leaf-marks.ts';
export * from './leaf-sizes.ts';
export * from './metadata-floor.ts';
export * from './metadata-nodes.ts';
