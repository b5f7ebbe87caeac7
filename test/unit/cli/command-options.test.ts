import { describe, expect, it } from 'vitest';
import { TAKEN, TAKEN_BY_SUBCOMMAND, refuseOptionsNotTaken } from '../../../cli/command-options.ts';
import { RETENTION_RULES } from '../../../main/engine/retention-policy.ts';

// An option only one subcommand takes, given to another, would be dropped without a word:
// `canopy buckets --type backup` listed every bucket, not the backup ones.

describe('options only some subcommands take', () => {
  it('are refused for another subcommand, naming those that take them', () => {
    const refusal =
      (name: string, sub: string | undefined, ...options: string[]) =>
      () =>
        refuseOptionsNotTaken(name, sub, options);
    expect(refusal('buckets', undefined, 'type')).toThrow(
      'buckets list does not take --type (buckets create takes it)',
    );
    expect(refusal('buckets', 'create', 'type', 'class')).not.toThrow();
    expect(refusal('devices', 'revoke', 'name')).toThrow(
      'devices revoke does not take --name (devices approve takes it)',
    );
    expect(refusal('account', undefined, 'locale', 'display-name')).toThrow(
      'account show does not take --locale, --display-name (account set takes them)',
    );
    expect(refusal('versions', 'delete', 'keep-last')).toThrow(
      'versions delete does not take --keep-last (versions prune and versions policy take it)',
    );
    expect(refusal('versions', 'policy', 'dry-run')).toThrow(
      'versions policy does not take --dry-run (versions prune takes it)',
    );
    // Taken by no one subcommand together: none named.
    expect(refusal('versions', undefined, 'dry-run', 'clear')).toThrow(
      /^versions list does not take --dry-run, --clear$/,
    );
    expect(refusal('versions', 'prune', 'bucket', 'keep-daily', 'json')).not.toThrow();
    // An option the command takes for all its subcommands stays taken by each.
    expect(refusal('versions', 'delete', 'bucket')).not.toThrow();
  });

  it('include a keep option for each rule of a retention policy', () => {
    const rules = [...RETENTION_RULES.map((rule) => `keep-${rule}`), 'keep-within'].sort();
    const by = TAKEN_BY_SUBCOMMAND.get('versions')?.by;
    expect(by?.['prune']?.filter((option) => option.startsWith('keep-')).sort()).toEqual(rules);
    expect(by?.['policy']?.filter((option) => option.startsWith('keep-')).sort()).toEqual(rules);
  });

  it('are options their command takes', () => {
    for (const [name, { by }] of TAKEN_BY_SUBCOMMAND)
      for (const option of Object.values(by).flat())
        expect(TAKEN.get(name), `${name} --${option}`).toContain(option);
  });
});
