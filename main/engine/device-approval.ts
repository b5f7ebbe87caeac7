import { isEngineError } from '../api/index.ts';
import { parseP384PublicKeyPem } from '../protocol/index.ts';
import { AnswerCutError, type ServiceClient } from '../service/index.ts';

// Approving another device's key (`canopy devices approve`, §8.3). The request cannot simply be
// sent again: once the key is registered, the service refuses it again (409). So when its answer
// broke off after the service registered the key, or a run again meets the key registered by the
// run before, the account's keys tell: the key among them is approved.

/** Registers `pem` to this account; its id and fingerprint, also when registered already. */
export async function approveDeviceKey(
  client: ServiceClient,
  input: { pem: string; name?: string },
): Promise<{ id: string; fingerprint: string }> {
  try {
    return await client.addDeviceKey(input);
  } catch (error) {
    if (!(error instanceof AnswerCutError) && !isEngineError(error, 'conflict')) throw error;
    const { fingerprint } = parseP384PublicKeyPem(input.pem);
    const registered = (await client.listDeviceKeys()).find(
      (key) => key.fingerprint === fingerprint,
    );
    // Not among this account's keys: another account holds it (409), or the lost answer was
    // not a registration; the error stands.
    if (registered === undefined) throw error;
    return { id: registered.id, fingerprint: registered.fingerprint };
  }
}
