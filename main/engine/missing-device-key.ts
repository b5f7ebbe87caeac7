import { EngineError } from '../api/index.ts';
import type { SecretStore } from '../identity/index.ts';

// The device key of the enrolled account is not where Canopy looked. Most often the store is
// the secrets file, standing in for a keychain that did not answer: a command run from cron or
// over ssh reaches no Secret Service, while the key was made in the desktop session's keychain.
// Enrolling anew there would make this computer a second device of the account for nothing, so
// the message says first where the key most likely is.

export function missingDeviceKey(secrets: SecretStore): EngineError {
  const { location, keychainUnanswered } = secrets;
  return new EngineError(
    'secret_store',
    keychainUnanswered === undefined
      ? `this device's key is missing from ${location}: log in again to enroll this device anew; its backups are untouched`
      : `this device's key is not in ${location}, and ${keychainUnanswered}, where Canopy keeps it when one answers at login: run Canopy where your keychain answers (within your desktop session; cron and ssh reach none, a systemd user timer does), or else log in again to enroll this device anew; its backups are untouched`,
  );
}
