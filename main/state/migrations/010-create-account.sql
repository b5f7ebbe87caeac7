-- The one account this Canopy home is enrolled with. Secrets never live here: the device key
-- and bucket keys are in the SecretStore, under the account names recorded below.
CREATE TABLE account (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  -- 'remote': a service at server_url; 'local': Canopy's embedded service on local_data_dir
  mode TEXT NOT NULL,
  server_url TEXT,
  local_data_dir TEXT,
  user_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  email TEXT,
  device_name TEXT,
  device_key_account TEXT NOT NULL,
  enrolled_at INTEGER NOT NULL
);

CREATE TABLE buckets (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  storage_class TEXT NOT NULL,
  bucket_key_account TEXT,
  bucket_key_fingerprint TEXT,
  updated_at INTEGER NOT NULL
);

-- A random id for this home, so keychain entries of two homes on one machine never collide.
CREATE TABLE home (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  home_id TEXT NOT NULL
);
