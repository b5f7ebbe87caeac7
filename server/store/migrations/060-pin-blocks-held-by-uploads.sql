-- Blocks a shard upload in flight found stored when they arrived, and so does not write again.
-- Garbage collection leaves them while the upload runs, in whichever process serves it: a
-- block another user freed meanwhile would otherwise be gone when the shard commits. An
-- upload removes its rows when it ends; a lone start removes those a crash left.
CREATE TABLE upload_pins (
  upload TEXT NOT NULL,
  cid TEXT NOT NULL,
  PRIMARY KEY (cid, upload)
) WITHOUT ROWID;
CREATE INDEX upload_pins_by_upload ON upload_pins(upload);
