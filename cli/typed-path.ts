import { typedInFolder } from './working-folder.ts';

// A PATH word of `ls`, `restore`, `diff` and `history` as the engine takes it: with the folder
// it was typed in, so that a relative path the shell completed (`beach.jpg` in ~/Pictures/2019)
// names what it names there (main/engine/paths-in-versions.ts).

export function typedPath(word: string): { path: string; typedIn?: string } {
  // Typed in a folder deleted meanwhile, a relative path goes from the version's top, as it
  // does in any folder outside the one backed up.
  const typedIn = typedInFolder();
  return { path: word, ...(typedIn === undefined ? {} : { typedIn }) };
}
