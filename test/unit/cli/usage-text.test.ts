import { describe, expect, it } from 'vitest';
import { ANY_COMMAND, OPTIONS, TAKEN } from '../../../cli/command-options.ts';
import { usageLinesOf } from '../../../cli/usage-text.ts';

// `canopy --help` names each command's options by hand, apart from the list the command line is
// refused by: the two must say the same, or help offers an option the command then refuses. A
// command missing a word it needs shows its own lines of that help.

/** The options the usage lines of `command` show. */
function optionsShown(command: string): string[] {
  const shown = new Set<string>();
  for (const line of usageLinesOf(command))
    for (const [, option] of line.matchAll(/--([a-z][a-z-]*)/g))
      if (option !== undefined) shown.add(option);
  return [...shown].sort();
}

describe('canopy --help', () => {
  it('shows every command with the options it takes, and no other', () => {
    for (const [command, taken] of TAKEN)
      expect({ command, options: optionsShown(command) }).toEqual({
        command,
        options: [...taken].sort(),
      });
  });

  it('reads no option that no command takes', () => {
    const takenByAny = new Set([...ANY_COMMAND, ...[...TAKEN.values()].flat()]);
    expect(Object.keys(OPTIONS).filter((option) => !takenByAny.has(option))).toEqual([]);
    expect([...takenByAny].filter((option) => !(option in OPTIONS))).toEqual([]);
  });

  it("gives each command's own lines, with the lines that go on from them", () => {
    for (const command of TAKEN.keys()) expect(usageLinesOf(command), command).not.toEqual([]);
    expect(usageLinesOf('logout')).toEqual(['  whoami | logout']);
    expect(usageLinesOf('snapshots')).toEqual([
      '  versions --bucket NAME | snapshots --bucket NAME',
      '  snapshots create [ID] --bucket NAME               pin a version (the active one by default): the',
      '                                                    server keeps it until its snapshot is deleted',
      '  snapshots delete ID --bucket NAME                 unpin a version; the version stays',
    ]);
    const versions = usageLinesOf('versions');
    expect(versions).toHaveLength(15);
    expect(versions[2]?.trim()).toBe('their data no other version holds');
    expect(versions[10]?.trim()).toBe('always stays');
    expect(versions[14]?.trim()).toBe('rule applies it too)');
    expect(usageLinesOf('create')).toEqual([]);
  });
});
