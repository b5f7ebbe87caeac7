import path from 'node:path';

// A version's `source_label` (§17.3) as this client writes it: `host:/absolute/folder`.

/** The host and folder a source label (`host:/absolute/folder`, §17.3) names. */
export interface SourcePlace {
  readonly host: string;
  readonly folder: string;
}

/** Where a version was backed up from; undefined for a label this client did not write. */
export function sourcePlace(label: unknown): SourcePlace | undefined {
  if (typeof label !== 'string') return undefined;
  // A host name holds no colon; the folder after it may.
  const colon = label.indexOf(':');
  if (colon <= 0) return undefined;
  const folder = label.slice(colon + 1);
  if (!path.isAbsolute(folder)) return undefined;
  return { host: label.slice(0, colon), folder };
}
