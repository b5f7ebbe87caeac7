// Where Canopy's own files are (its package.json, the SQL migrations), found from the package's
// root. Plain Node; imports nothing else of the engine, so server/ and cli/ may import it.

export * from './package-root.ts';
