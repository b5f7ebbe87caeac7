// A count with its noun, singular for one: "1 file", "2 files", "0 files". Output people read
// (and tests compare) says "1 symlink", not "1 symlinks".

export function counted(count: number, singular: string, plural = `${singular}s`): string {
  return `${count} ${count === 1 ? singular : plural}`;
}
