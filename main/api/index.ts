// The contract between the engine and every host (CLI, daemon, Electron): error codes and, as
// they arrive, EngineApi requests and EngineEvent pushes. Pure TypeScript.

export * from './engine-error.ts';
export * from './bytes-for-people.ts';
export * from './time-for-people.ts';
export * from './disk-full.ts';
export * from './disk-gone.ts';
export * from './passing-failure.ts';
export * from './state-repair.ts';
export * from './stopped.ts';
export * from './system-error-code.ts';
export * from './thread-failure.ts';
