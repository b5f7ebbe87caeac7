import { describe, expect, it } from 'vitest';
import { base64urlEncode } from '../../../main/protocol/index.ts';
import { windowState, uploadWindowOver } from '../../../main/uploader/upload-window.ts';

// Where an upload stands in its window, from its storage authorization's iat and exp (whole
// seconds), the time, and its slowest shard so far.

/** A storage authorization's shape with these claims; its signature is not read here. */
function authorization(iat: number, exp: number): string {
  return [
    base64urlEncode(JSON.stringify({ alg: 'ES384', typ: 'JWT' })),
    base64urlEncode(JSON.stringify({ iat, exp, nbf: iat })),
    base64urlEncode('signature'),
  ].join('.');
}

const DAY = 24 * 3600;
const pushedAt = 1_800_000_000;
const sa = authorization(pushedAt, pushedAt + DAY);
const at = (secondsAfterPush: number): number => (pushedAt + secondsAfterPush) * 1000;

describe('windowState', () => {
  it('is open for three quarters of a day, ending in the last six hours, and over after', () => {
    expect(windowState(sa, at(0), 0)).toBe('open');
    expect(windowState(sa, at(18 * 3600 - 1), 60_000)).toBe('open');
    expect(windowState(sa, at(18 * 3600 + 1), 60_000)).toBe('ending');
    expect(windowState(sa, at(DAY - 1), 60_000)).toBe('ending');
    expect(windowState(sa, at(DAY), 60_000)).toBe('over');
  });

  it('ends earlier when shards are slow, but never in the first half of the window', () => {
    const threeHourShards = 3 * 3600 * 1000;
    // Three shards' time (9 h) before the end, rather than a quarter of the window (6 h).
    expect(windowState(sa, at(15 * 3600 - 1), threeHourShards)).toBe('open');
    expect(windowState(sa, at(15 * 3600 + 1), threeHourShards)).toBe('ending');
    expect(windowState(sa, at(11 * 3600), 10 * threeHourShards)).toBe('open');
    expect(windowState(sa, at(13 * 3600), 10 * threeHourShards)).toBe('ending');
  });

  it('ends halfway when going on as a new version reads nothing again, whatever the shards', () => {
    expect(windowState(sa, at(12 * 3600 - 1), 60_000, true)).toBe('open');
    expect(windowState(sa, at(12 * 3600 + 1), 60_000, true)).toBe('ending');
    expect(windowState(sa, at(12 * 3600 - 1), 3 * 3600 * 1000, true)).toBe('open');
    expect(windowState(sa, at(DAY), 60_000, true)).toBe('over');
  });

  it('leaves an upload whose authorization it cannot read as it is', () => {
    expect(windowState('not.a.token', at(DAY * 2), 0)).toBe('open');
    expect(windowState(authorization(pushedAt, pushedAt), at(0), 0)).toBe('open');
  });
});

describe('uploadWindowOver', () => {
  it("names the window's length as the authorization states it", () => {
    expect(uploadWindowOver(sa, undefined).message).toMatch(/within its 24 h upload window/);
    expect(uploadWindowOver(authorization(0, 90), undefined).message).toMatch(
      /within its 90 s upload window/,
    );
    expect(uploadWindowOver('garbage', undefined).message).toMatch(/within its upload window/);
    expect(uploadWindowOver(sa, undefined, true).message).toMatch(
      /24 h upload window, and preparing this backup took most of it: back up less at once/,
    );
  });
});
