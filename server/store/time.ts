/** RFC 3339 in UTC with `Z`; whole seconds when the value has no milliseconds (§3). */
export function isoTimestamp(ms: number): string {
  const text = new Date(ms).toISOString();
  return ms % 1000 === 0 ? text.replace('.000Z', 'Z') : text;
}

export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}
