// A time as canopy tells it in its text (2026-11-30 12:22:24, on the computer's clock, with its
// offset from UTC in the hour the clock shows twice), as a regular expression's source, for
// tests that check a line around it.
export const TOLD_TIME = String.raw`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [+-]\d\d:\d\d)?`;
