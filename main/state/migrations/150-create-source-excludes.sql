-- Exclude rules a user keeps in Canopy for a source folder (issue 4: rules "per source and in a
-- .canopyignore file"): for a folder the user would rather not write a file into, or cannot
-- (read-only, shared). Keyed by the folder's absolute path, whichever bucket it goes to, so a
-- dry run needs no server. `rules` is a JSON array of gitignore lines, in order.
CREATE TABLE source_excludes (
  source_dir TEXT PRIMARY KEY,
  rules TEXT NOT NULL
);
