// The device's identity: key pairs kept in a SecretStore (keychain or 0600 file), and device
// JWTs minted from them. May import main/api and main/protocol only.

export * from './device-key.ts';
export * from './file-secret-store.ts';
export * from './keychain-secret-store.ts';
export * from './open-secret-store.ts';
export type { SecretStore } from './secret-store.ts';
export * from './token-minter.ts';
