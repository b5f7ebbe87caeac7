import { describe, expect, it } from 'vitest';
import { ANY_COMMAND, OPTIONS, TAKEN } from '../../../cli/command-options.ts';
import { USAGE } from '../../../cli/usage-text.ts';

// `canopy --help` names each command's options by hand, apart from the list the command line is
// refused by: the two must say the same, or help offers an option the command then refuses.

/** The options USAGE shows for each command, by its name. */
function optionsShown(): Map<string, Set<string>> {
  const shown = new Map<string, Set<string>>();
  // The commands are the second paragraph: one per line two spaces in, continued further in.
  const [, commands = ''] = USAGE.split('\n\n');
  let current: Set<string> | undefined;
  for (const line of commands.split('\n')) {
    const words = line.trim().split(/\s+/);
    for (const [index, word] of words.entries()) {
      // A command starts a line, or follows a bar between two commands (`whoami | logout`).
      const startsCommand =
        TAKEN.has(word) && (index === 0 ? /^ {2}\S/.test(line) : words[index - 1] === '|');
      if (startsCommand) {
        current = shown.get(word) ?? new Set();
        shown.set(word, current);
        continue;
      }
      for (const [, option] of word.matchAll(/--([a-z][a-z-]*)/g))
        if (option !== undefined) current?.add(option);
    }
  }
  return shown;
}

describe('canopy --help', () => {
  it('shows every command with the options it takes, and no other', () => {
    const shown = optionsShown();
    expect([...shown.keys()].sort()).toEqual([...TAKEN.keys()].sort());
    for (const [command, taken] of TAKEN)
      expect({ command, options: [...(shown.get(command) ?? [])].sort() }).toEqual({
        command,
        options: [...taken].sort(),
      });
  });

  it('reads no option that no command takes', () => {
    const takenByAny = new Set([...ANY_COMMAND, ...[...TAKEN.values()].flat()]);
    expect(Object.keys(OPTIONS).filter((option) => !takenByAny.has(option))).toEqual([]);
    expect([...takenByAny].filter((option) => !(option in OPTIONS))).toEqual([]);
  });
});
