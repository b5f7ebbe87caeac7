// The service names the files of its data `<id><suffix>`, each id a UUID it made (packs,
// files of metadata chunks). Clearing what a crash left removes only files so named that no
// row names: a file of another name in those folders (an operator's copy of a pack kept aside,
// a file a sync tool left) is someone else's, and stays.

const OWN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The id of `name` when it is a file the service names `<id><suffix>`; undefined otherwise. */
export function ownFileId(name: string, suffix: string): string | undefined {
  if (!name.endsWith(suffix)) return undefined;
  const id = name.slice(0, -suffix.length);
  return OWN_ID.test(id) ? id : undefined;
}
