import { formatTime } from '../../main/api/index.ts';
import {
  BUCKET_TYPES,
  STORAGE_CLASSES,
  type BucketType,
  type StorageClass,
} from '../../main/protocol/index.ts';
import { consentToDeleteBucket } from '../bucket-deletion-consent.ts';
import { canAsk } from '../terminal-question.ts';
import { UsageError, need, oneOf, table, type CommandContext } from '../command-context.ts';

// `canopy buckets`: list, create, rename and delete buckets (deleting one that holds versions
// asks first: bucket-deletion-consent.ts).

/** The service's RFC 3339 time on this computer's clock, as the other lists tell times. */
function updatedAt(text: string): string {
  const at = Date.parse(text);
  return Number.isNaN(at) ? text : formatTime(at);
}

export async function bucketsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out, str } = command;
  switch (sub ?? 'list') {
    case 'list': {
      command.takesWords(1);
      const buckets = await engine.listBuckets();
      out.print(
        buckets.length === 0
          ? 'no buckets yet'
          : table([
              ['NAME', 'TYPE', 'CLASS', 'UPDATED'],
              ...buckets.map((b) => [b.name, b.type, b.storage_class, updatedAt(b.updated_at)]),
            ]),
        buckets,
      );
      return;
    }
    case 'create': {
      command.takesWords(2);
      const bucket = await engine.createBucket({
        name: need(rest[0], 'NAME'),
        type: oneOf<BucketType>(str('type') ?? 'backup', '--type', BUCKET_TYPES),
        storageClass: oneOf<StorageClass>(str('class') ?? 'hot', '--class', STORAGE_CLASSES),
      });
      out.print(
        `created bucket "${bucket.name}" (${bucket.type}, ${bucket.storage_class})`,
        bucket,
      );
      return;
    }
    case 'rename': {
      command.takesWords(3);
      const bucket = await engine.renameBucket({
        name: need(rest[0], 'NAME'),
        newName: need(rest[1], 'NEWNAME'),
      });
      out.print(`renamed bucket to "${bucket.name}"`, bucket);
      return;
    }
    case 'delete': {
      command.takesWords(2);
      const name = need(rest[0], 'NAME');
      await consentToDeleteBucket(engine, name, {
        yes: command.values['yes'] === true,
        canAsk: canAsk(out.json),
      });
      await engine.deleteBucket({ name });
      out.print(`deleted bucket "${name}"`, { deleted: name });
      return;
    }
    default:
      throw new UsageError(`unknown buckets command: ${sub}`);
  }
}
