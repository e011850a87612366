/** The Deno server's URL-signing key, kept in its store directory when not given. */

/**
 * The store's signing key, created with 0600 permissions on first use. It is written to a
 * temporary file and renamed into place, so a failed write (a full disk) leaves no key rather
 * than an empty one; a key file too short to sign with (left by an older version) is replaced.
 */
export async function loadSigningKey(storeDir: string): Promise<Uint8Array> {
  const path = `${storeDir}/signing.key`;
  let damaged = false;
  try {
    const key = await Deno.readFile(path);
    if (key.byteLength >= 16) return key;
    console.error(`gitedge: ${path} holds ${key.byteLength} bytes, too few to sign with: replaced`);
    damaged = true;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const key = crypto.getRandomValues(new Uint8Array(32));
  await Deno.mkdir(storeDir, { recursive: true });
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeFile(tmp, key, { createNew: true, mode: 0o600 });
    // A damaged key is replaced; otherwise a link never overwrites a key another process made.
    if (damaged) await Deno.rename(tmp, path);
    else await Deno.link(tmp, path);
  } catch (err) {
    if (err instanceof Deno.errors.AlreadyExists) return await Deno.readFile(path);
    throw err;
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
  return key;
}
