// A restored entry's mtime, as Node's utimes calls take it. They take a time in seconds as a
// number, but silently put the current time in place of a negative one: a file from before 1970
// came back dated today. A Date is taken as it is, to the millisecond; later times keep the
// number, which carries them to the microsecond.

export function fileTime(seconds: number): number | Date {
  return seconds < 0 ? new Date(seconds * 1000) : seconds;
}
