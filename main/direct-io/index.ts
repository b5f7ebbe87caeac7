// Writing files with O_DIRECT from page-aligned memory, for the restore's files and the
// server's pack files: both write hundreds of megabytes that nobody reads soon after. Plain
// node:fs; imports nothing else of the engine, so server/ may import it as it does main/protocol.

export * from './aligned-slots.ts';
export * from './direct-writer.ts';
