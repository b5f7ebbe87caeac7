-- A stage sealed for the version it describes once that version was pushed (issue 4: "kill the
-- process at any point and the next run resumes"): the run that finishes the version's
-- interrupted upload makes the stage the source's index, so the files it read are not read
-- again. `kept_folders` is a JSON array of the folders whose indexed entries stay as they are.
ALTER TABLE file_index_stages ADD COLUMN version_id TEXT;
ALTER TABLE file_index_stages ADD COLUMN kept_folders TEXT;
