import { formatTime } from '../../main/api/index.ts';
import { consentToRevokeDevice } from '../device-revocation-consent.ts';
import { canAsk } from '../terminal-question.ts';
import { readFileSync } from 'node:fs';
import type { AccountSummary } from '../../main/index.ts';
import { UsageError, need, offlineReason, table, type CommandContext } from '../command-context.ts';
import { folderWord } from '../working-folder.ts';

// Enrolling this device and the account: login, link, whoami, logout, devices, account,
// invoices, notifications.

/** The account this device is enrolled with, as `login` and `whoami` tell it. */
function describeAccount(account: AccountSummary): string {
  const where = account.mode === 'local' ? `this computer (${account.server})` : account.server;
  return [
    `logged in to ${where}`,
    `user ${account.userId}${account.email ? ` <${account.email}>` : ''}`,
    `device key ${account.keyId} (fingerprint ${account.fingerprint}) in the ${account.secretStore === 'keychain' ? 'OS keychain' : 'secrets file'}`,
  ].join('\n');
}

export async function loginCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, values, out, str } = command;
  command.takesWords(0);
  const name = str('name');
  const given = str('data');
  const dataDir = given === undefined ? undefined : folderWord(given);
  const account =
    values['local'] === true
      ? await engine.loginLocal({
          ...(dataDir === undefined ? {} : { dataDir }),
          ...(name === undefined ? {} : { deviceName: name }),
        })
      : await engine.login({
          server: need(str('server'), '--server (or --local)'),
          code: need(str('code'), '--code'),
          ...(name === undefined ? {} : { deviceName: name }),
        });
  out.print(describeAccount(account), account);
  return;
}

export async function linkCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, out, str } = command;
  command.takesWords(0);
  const name = str('name');
  const account = await engine.link({
    server: need(str('server'), '--server'),
    ...(name === undefined ? {} : { deviceName: name }),
    onWaiting: ({ fingerprint, pem }) => {
      if (out.json)
        process.stdout.write(`${JSON.stringify({ waiting: true, fingerprint, pem })}\n`);
      else
        process.stdout.write(
          `This device's fingerprint: ${fingerprint}\nApprove it from a linked device with \`canopy devices approve FILE\`, FILE holding:\n${pem}Waiting for approval…\n`,
        );
    },
  });
  out.print(
    `${describeAccount(account)}\nCheck that ${account.email ?? 'this account'} is your account before your first backup: anyone who sees a public key can register it.`,
    account,
  );
  return;
}

export async function whoamiCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, out } = command;
  command.takesWords(0);
  const account = await engine.whoami();
  if (account.offlineBecause !== null)
    process.stderr.write(
      `canopy: ${offlineReason(account.offlineBecause)}; showing the account as this device enrolled it\n`,
    );
  out.print(
    account.storageHost === null
      ? describeAccount(account)
      : `${describeAccount(account)}\nstorage host ${account.storageHost}`,
    account,
  );
  return;
}

export async function logoutCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, out } = command;
  command.takesWords(0);
  await engine.logout();
  out.print('logged out; this device key was deleted', { loggedOut: true });
  return;
}

export async function devicesCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out, str } = command;
  switch (sub ?? 'list') {
    case 'list': {
      command.takesWords(1);
      const devices = await engine.listDevices();
      out.print(
        table([
          ['ID', 'NAME', 'FINGERPRINT', 'LAST SEEN'],
          ...devices.map((d) => [
            d.id,
            `${d.name ?? '-'}${d.current ? ' (this device)' : ''}`,
            d.fingerprint,
            d.last_seen_at === null ? 'never' : formatTime(d.last_seen_at * 1000),
          ]),
        ]),
        devices,
      );
      return;
    }
    case 'approve': {
      command.takesWords(2);
      const file = need(rest[0], 'PEMFILE');
      let pem: string;
      try {
        pem = readFileSync(file, 'utf8');
      } catch {
        throw new UsageError(`cannot read ${file}`);
      }
      const name = str('name');
      const added = await engine.approveDevice({
        pem,
        ...(name === undefined ? {} : { name }),
      });
      out.print(`approved device ${added.id} (fingerprint ${added.fingerprint})`, added);
      return;
    }
    case 'revoke': {
      command.takesWords(2);
      const id = need(rest[0], 'ID');
      const { thisDevice } = await consentToRevokeDevice(engine, id, {
        yes: command.values['yes'] === true,
        canAsk: canAsk(out.json),
      });
      await engine.revokeDevice(id);
      if (!thisDevice) {
        out.print(`revoked device ${id}`, { revoked: id });
        return;
      }
      // Its key refused from now on, this device is logged out, as after `canopy logout`.
      await engine.logout();
      out.print(`revoked device ${id}, this device, and logged it out`, {
        revoked: id,
        loggedOut: true,
      });
      return;
    }
    case 'code': {
      command.takesWords(1);
      const issued = await engine.newEnrollmentCode();
      out.print(
        `enrollment code ${issued.code} (valid until ${formatTime(issued.expiresAt * 1000)})`,
        issued,
      );
      return;
    }
    default:
      throw new UsageError(`unknown devices command: ${sub}`);
  }
}

export async function accountCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, out, str } = command;
  command.takesWords(1);
  if ((sub ?? 'show') === 'show') {
    const user = await engine.getAccount();
    out.print(
      table([
        ['email', user.email ?? '-'],
        ['display name', user.display_name ?? '-'],
        ['locale', user.locale ?? '-'],
        ['egress this month', `${user.monthly_egress} bytes`],
      ]),
      user,
    );
    return;
  }
  if (sub !== 'set') throw new UsageError(`unknown account command: ${sub}`);
  const displayName = str('display-name');
  const locale = str('locale');
  if (displayName === undefined && locale === undefined)
    throw new UsageError('--display-name or --locale is required');
  const user = await engine.updateAccount({
    ...(displayName === undefined ? {} : { displayName }),
    ...(locale === undefined ? {} : { locale }),
  });
  out.print('account updated', user);
  return;
}

export async function invoicesCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, out } = command;
  command.takesWords(0);
  const invoices = await engine.listInvoices();
  out.print(
    invoices.length === 0
      ? 'no invoices'
      : table([
          ['ID', 'PERIOD', 'AMOUNT', 'STATUS'],
          ...invoices.map((i) => [
            i.id,
            `${i.billing_start.slice(0, 10)}..${i.billing_end.slice(0, 10)}`,
            `$${(i.total_amount / 100).toFixed(2)}`,
            i.status,
          ]),
        ]),
    invoices,
  );
  return;
}

export async function notificationsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out } = command;
  if ((sub ?? 'list') === 'list') {
    command.takesWords(1);
    const notes = await engine.listNotifications();
    out.print(
      notes.length === 0
        ? 'no notifications'
        : table([
            ['ID', 'WHEN', 'SEVERITY', 'MESSAGE'],
            ...notes.map((n) => [n.id, formatTime(n.created_at * 1000), n.severity, n.message]),
          ]),
      notes,
    );
    return;
  }
  if (sub !== 'dismiss') throw new UsageError(`unknown notifications command: ${sub}`);
  command.takesWords(2);
  const id = need(rest[0], 'ID');
  await engine.dismissNotification(id);
  out.print(`dismissed ${id}`, { dismissed: id });
  return;
}
