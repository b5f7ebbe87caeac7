import { EngineError } from '../main/api/index.ts';
import type { Engine } from '../main/index.ts';
import { UsageError } from './command-context.ts';
import { askLine, type GoAhead } from './terminal-question.ts';

// Revoking the key of this very device locks it out of the account: its next request is refused
// (§8.2), and it can only come back with a new enrollment code, from another device or, when it
// was the account's last, from the server's administrator. One revoked by mistake (an id copied
// from the wrong line of `canopy devices`) is asked about first, as a deleted bucket is: "yes"
// typed at the terminal, or --yes from a script. Another device's key is revoked at once: this
// one can still enroll it again.

/**
 * Returns once revoking the key `id` may go ahead, saying whether it is this device's; throws
 * when it may not: a usage error when --yes is needed and was not given, `stopped` when the
 * user did not confirm.
 */
export async function consentToRevokeDevice(
  engine: Engine,
  id: string,
  asked: GoAhead,
): Promise<{ thisDevice: boolean }> {
  const devices = await engine.listDevices();
  const thisDevice = devices.some((device) => device.id === id && device.current);
  if (!thisDevice || asked.yes) return { thisDevice };
  const consequence =
    devices.length === 1
      ? "it is the account's only device: once it is revoked, only the server's administrator can let you in again (a new enrollment code)"
      : 'once it is revoked, it reaches the account again only with a new enrollment code (canopy devices code, on another device)';
  if (!asked.canAsk)
    throw new UsageError(
      `device ${id} is this device, and ${consequence}: add --yes to revoke it without being asked`,
    );
  const typed = await askLine(
    `device ${id} is this device, and ${consequence}.\nType yes to revoke it: `,
  );
  if (typed?.trim() !== 'yes')
    throw new EngineError(
      'stopped',
      `this device was not revoked: ${typed === null ? 'nothing was typed' : 'yes was not typed'}`,
    );
  return { thisDevice };
}
