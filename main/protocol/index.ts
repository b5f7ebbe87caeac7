// The Bucket Storage Service wire contract (bucket-service.md), shared by the server and the
// client: resource shapes, request parsing, keys, fingerprints, JWTs, CIDs and CARs.
// Pure TypeScript plus node:crypto; imports nothing from the rest of the engine.

export * from './byte-pieces.ts';
export * from './car-reader.ts';
export * from './car-writer.ts';
export * from './cid.ts';
export * from './sha256-of.ts';
export * from './cid-table.ts';
export * from './dag-pb-links.ts';
export * from './protobuf-varint.ts';
export * from './compact-jws.ts';
export * from './device-jwt.ts';
export * from './enrollment-code.ts';
export * from './field-rules.ts';
export * from './ids.ts';
export * from './p384-public-key.ts';
export * from './requests.ts';
export * from './resources.ts';
export * from './storage-authorization.ts';
export * from './text.ts';
export * from './validation-error.ts';
export * from './wire.ts';
export * from './utf8-order.ts';
export * from './source-label.ts';
export * from './restored-time.ts';
