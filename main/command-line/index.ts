// What the `canopy` and `canopy-server` command lines share: how a parse error is told. Plain
// Node, no engine; server/ may import it, as it imports main/protocol.
export * from './parse-error.ts';
