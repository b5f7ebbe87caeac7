// A restored entry's mtime, as Node's utimes calls take it. They take a time in seconds as a
// number, but silently put the current time in place of a negative one: a file from before 1970
// came back dated today. A Date would be taken, but only to the millisecond (a 1960 file's
// .123456789 s came back as .124001). Node's utimes calls also take the seconds as a numeric
// string, which it passes on as it is, negative too: so a time before 1970 keeps the
// microseconds, as later times do as a number.

export function fileTime(seconds: number): number | string {
  return seconds < 0 ? String(seconds) : seconds;
}
